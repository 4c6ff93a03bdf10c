"""setuptools glue for pyproject.toml: the extension pasa._pasa is built by the project's CMake (the target
pasa_python, nothing else), in a build folder of its own, for the interpreter that runs pip.

Environment: PASA_CMAKE_ARGS (extra configure arguments, e.g. "-DPASA_ARCH=x86-64-v3" for a wheel that runs on
another machine: the default, -march=native, builds for this CPU), CMAKE_BUILD_PARALLEL_LEVEL (jobs; default:
the CPU count). ccache is used where installed, as in every build of the project.
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def cmake_version():
    """The version of project(pasa VERSION x.y.z) in CMakeLists.txt: the one version of everything."""
    m = re.search(r"project\(\s*pasa\s+VERSION\s+([0-9][0-9.]*)", (ROOT / "CMakeLists.txt").read_text())
    if not m:
        raise RuntimeError("CMakeLists.txt: no project(pasa VERSION ...)")
    return m.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = pathlib.Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython3_EXECUTABLE={sys.executable}", "-DPASA_PYTHON=ON"]
        configure += shlex.split(os.environ.get("PASA_CMAKE_ARGS", ""))
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "pasa_python", "-j", jobs], check=True)
        built = sorted((build_dir / "python" / "pasa").glob("_pasa*.so"))
        if not built:
            raise RuntimeError(f"CMake built no module in {build_dir / 'python' / 'pasa'}: are pybind11-dev and "
                               "python3-dev installed (./scripts/deps.sh)?")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], target)


# setuptools wants its egg_info folder to exist beforehand.
(ROOT / "build-pip").mkdir(exist_ok=True)

setup(
    version=cmake_version(),
    ext_modules=[Extension("pasa._pasa", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own work folders: not build/ (the CMake build folder of the README) nor the source root.
    options={"build": {"build_base": str(ROOT / "build-pip")}, "egg_info": {"egg_base": str(ROOT / "build-pip")}},
)
