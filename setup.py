"""fairseq-specdec: speculative and parallel decoding for fairseq, as a ``--user-dir`` plugin.

Besides the package, the install writes ``fairseq_plugins_compat.pth`` into
site-packages: it activates the compatibility shims of ``fairseq_plugins_compat`` at
interpreter start, which fairseq 0.12.2 needs on Python >= 3.11 before any
``--user-dir`` is read.
"""
import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

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


setup(
    name="fairseq-specdec",
    version="0.1.0",
    description="SpecDec/GAD, aggressive, Jacobi and double-token decoding for fairseq",
    packages=find_packages(include=["fairseq_plugins", "fairseq_plugins.*", "fairseq_plugins_compat"]),
    python_requires=">=3.8",
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
    ],
    extras_require={"test": ["pytest", "hypothesis"]},
    entry_points={
        "console_scripts": [
            "fairseq-average-checkpoints = fairseq_plugins.scripts.average_checkpoints:cli_main",
        ]
    },
    cmdclass={"build_py": BuildPyWithStartupHook},
)
