"""Import every module of a package, so that each registers itself with fairseq."""
import importlib
import pkgutil


def import_submodules(package_name, package_path):
    for module in pkgutil.iter_modules(package_path):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package_name}.{module.name}")
