"""Build the CPU kernels with torch alone installed: `.ci/run` runs it beside the installs of
everything else, so no test waits minutes for a compiler. (`ownvoice doctor --prepare` does the
same once the package is installed.) The kernels module is loaded from its file, without the
package's __init__, which needs the other dependencies."""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

KERNELS = Path(__file__).resolve().parent.parent / "ownvoice" / "kernels" / "__init__.py"


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    spec = importlib.util.spec_from_file_location("ownvoice_kernels", KERNELS)
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    fine, said = kernels.prepare()
    print(said)
    return 0 if fine else 1


if __name__ == "__main__":
    sys.exit(main())
