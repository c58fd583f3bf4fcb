"""fairseq-specdec: speculative and parallel decoding for fairseq, as a ``--user-dir`` plugin.

Besides the package, the install writes ``fairseq_plugins_compat.pth`` into
site-packages: it activates the compatibility shims of ``fairseq_plugins_compat`` at
interpreter start, which fairseq 0.12.2 needs on Python >= 3.11 before any
``--user-dir`` is read.  ``pip install .`` gets it from ``build_py``, ``pip install -e .``
from ``editable_wheel`` (setuptools >= 64) or ``develop`` (older setuptools).
"""
import glob
import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.develop import develop

try:
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:  # setuptools < 64: pip runs `setup.py develop` instead
    editable_wheel = None

DEMO_DIR = "checkpoints/demo"  # the shipped Multi30k pair, installed to share/fairseq-specdec/demo
DEMO_FILES = ("verifier.pt", "drafter.pt", "drafter-beam5.pt", "sentencepiece.model", "dict.en.txt", "dict.de.txt",
              "sentences.en")
# a shipped GEC model (recipes/gec/ship.sh), when the folder is there: installed to share/fairseq-specdec/gec
GEC_FILES = sorted(path for path in glob.glob("checkpoints/gec/*") if os.path.isfile(path))
PTH_NAME = "fairseq_plugins_compat.pth"
PTH_LINE = "import fairseq_plugins_compat.startup as s; s.install()\n"


class BuildPyWithStartupHook(build_py):
    """Puts the ``.pth`` file at the root of the wheel, i.e. into site-packages."""

    def run(self):
        super().run()
        with open(os.path.join(self.build_lib, PTH_NAME), "w") as f:
            f.write(PTH_LINE)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH_NAME)]


def write_pth(directory):
    with open(os.path.join(directory, PTH_NAME), "w") as f:
        f.write(PTH_LINE)


class DevelopWithStartupHook(develop):
    """Legacy editable install (``setup.py develop``): the ``.pth`` goes next to its egg-link."""

    def run(self):
        super().run()
        # setuptools >= 80's develop only runs `pip install -e .`, i.e. editable_wheel below
        if not getattr(self, "uninstall", False) and getattr(self, "install_dir", None):
            write_pth(self.install_dir)


CMDCLASS = {"build_py": BuildPyWithStartupHook, "develop": DevelopWithStartupHook}

if editable_wheel is not None:

    class EditableWheelWithStartupHook(editable_wheel):
        """``pip install -e .``: the editable wheel carries the ``.pth`` too (the files of
        ``build_py`` do not go into it), at its root, i.e. into site-packages."""

        def _run_build_commands(self, dist_name, unpacked_wheel, build_lib, tmp_dir):
            outputs = super()._run_build_commands(dist_name, unpacked_wheel, build_lib, tmp_dir)
            write_pth(unpacked_wheel)
            self.wrote_pth = True
            return outputs

        def run(self):
            super().run()
            if not getattr(self, "wrote_pth", False):
                raise SystemExit(f"this setuptools builds editable wheels without calling _run_build_commands: "
                                 f"{PTH_NAME} (needed by fairseq on Python >= 3.11) would be missing; "
                                 f"install with `pip install .` instead of `pip install -e .`")

    CMDCLASS["editable_wheel"] = EditableWheelWithStartupHook


setup(
    name="fairseq-specdec",
    version="0.1.0",
    description="SpecDec/GAD, aggressive, Jacobi and double-token decoding for fairseq",
    packages=find_packages(include=["fairseq_plugins", "fairseq_plugins.*", "fairseq_plugins_compat"]),
    python_requires=">=3.10",
    install_requires=[
        "torch>=2.1",
        "fairseq==0.12.2",
        "hydra-core>=1.0.7,<1.1",
        "omegaconf<2.1",
        "sacrebleu>=2.0",
        "sentencepiece",
        "subword-nmt",
        "numpy",
        "tqdm",
        "matplotlib",
        "gleu>=1.1",
    ],
    extras_require={"test": ["pytest", "pytest-xdist", "filelock", "hypothesis"]},
    entry_points={
        "console_scripts": [
            "fairseq-average-checkpoints = fairseq_plugins.scripts.average_checkpoints:cli_main",
        ]
    },
    data_files=[("share/fairseq-specdec/demo", [f"{DEMO_DIR}/{name}" for name in DEMO_FILES
                                                 if os.path.isfile(f"{DEMO_DIR}/{name}")])]
               + ([("share/fairseq-specdec/gec", GEC_FILES)] if GEC_FILES else []),
    cmdclass=CMDCLASS,
)
