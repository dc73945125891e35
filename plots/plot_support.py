"""What the plot scripts share: finding Debian's matplotlib, and writing a figure atomically."""

import os
import sys


def ensure_matplotlib(script):
    """Returns None when matplotlib imports; otherwise runs `script` again under Debian's
    /usr/bin/python3 (a pyenv or venv python3 first on the PATH often lacks
    python3-matplotlib), or returns exit code 3 with a message when there is none."""
    try:
        import matplotlib  # noqa: F401
        return None
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system):
            os.execv(system, [system, os.path.abspath(script)] + sys.argv[1:])
        print("%s: matplotlib is missing (Debian: apt-get install python3-matplotlib)"
              % os.path.basename(script), file=sys.stderr)
        return 3


def save_atomically(figure, out, dpi):
    """Writes the figure to a temporary file beside `out`, then renames it: never half a PNG."""
    temporary = os.path.join(os.path.dirname(os.path.abspath(out)),
                             ".%s.%d.tmp.png" % (os.path.basename(out), os.getpid()))
    figure.savefig(temporary, dpi=dpi)
    os.replace(temporary, out)
