"""The test suite runs in reproducible mode (`xlvin.kernels`): its numbers are those of every
x86-64 CPU with AVX2, and `xlvin reproduce`, reproducible by default, runs inside its processes.
The mode is set here, before any test module loads NumPy or torch."""

import os

from xlvin.kernels import pins

os.environ.update(pins())
