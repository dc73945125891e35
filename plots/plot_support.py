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
    try:
        figure.savefig(temporary, dpi=dpi)
        os.replace(temporary, out)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def run_data_plot(script, doc, data_name, check, plot):
    """The command line of a plot drawn from one JSON data file: `SCRIPT DATA.json OUT.png`.
    `check(data)` raises ValueError (or KeyError, TypeError) when the data cannot be drawn;
    exit code 2 then, 3 without matplotlib, 0 once `plot(data, out)` has written the PNG."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("data", help="%s (scripts/reproduce-paper.sh)" % data_name)
    parser.add_argument("out", help="output PNG")
    args = parser.parse_args()
    try:
        with open(args.data) as handle:
            data = json.load(handle)
        check(data)
    except KeyError as error:
        print("%s: error: %s: no key %s in the data" % (os.path.basename(script), args.data, error),
              file=sys.stderr)
        return 2
    except (OSError, ValueError, TypeError) as error:
        print("%s: error: %s: %s" % (os.path.basename(script), args.data, error), file=sys.stderr)
        return 2
    missing = ensure_matplotlib(script)
    if missing is not None:
        return missing
    plot(data, args.out)
    return 0


def run_runs_plot(script, doc, read, plot):
    """The command line of a plot drawn from several runs' JSON files:
    `SCRIPT [--title TEXT] OUT.png ARGUMENT...`, the usage being the line of `doc` that starts
    with "Usage: ". `read(arguments)` parses the arguments and their files (OSError or
    ValueError when it cannot); `plot(data, out, title)` draws. Exit code 2 on bad input
    (nothing written), 3 without matplotlib, 0 once drawn."""
    name = os.path.basename(script)
    arguments = sys.argv[1:]
    title = None
    if arguments[:1] == ["--title"]:
        if len(arguments) < 2:
            print("%s: error: --title needs a text" % name, file=sys.stderr)
            return 2
        title, arguments = arguments[1], arguments[2:]
    if len(arguments) < 2:
        usage = next(line for line in doc.splitlines() if line.startswith("Usage: "))
        print("usage: " + usage.split(": ", 1)[1], file=sys.stderr)
        return 2
    out = arguments[0]
    try:
        data = read(arguments[1:])
    except (OSError, ValueError) as error:
        print("%s: error: %s" % (name, error), file=sys.stderr)
        return 2
    missing = ensure_matplotlib(script)
    if missing is not None:
        return missing
    plot(data, out, title)
    return 0


def read_validation_plans(path, keys):
    """The "plans" of an `osdp validate --json` output or a fidelity_bench fidelity.json, each
    checked to carry `keys` and a numeric time error; ValueError when it does not."""
    document = read_input_json(path)
    plans = document.get("plans") if isinstance(document, dict) else None
    if not isinstance(plans, list) or not plans:
        raise ValueError("%s: no \"plans\" list (is it `osdp validate --json` output?)" % path)
    for plan in plans:
        for key in keys:
            if not isinstance(plan, dict) or key not in plan:
                raise ValueError("%s: a plan without \"%s\"" % (path, key))
        if not isinstance(plan["time_error_percent"], (int, float)):
            raise ValueError("%s: a plan's \"time_error_percent\" is not a number" % path)
    return plans


INPUT_LIMIT_BYTES = 1 << 30


def read_input_text(path):
    """The text of the input file `path`. ValueError, naming the path, unless it is a readable
    regular file of at most 1 GiB: a FIFO would block the plot, /dev/zero never ends."""
    import stat

    try:
        status = os.stat(path)
    except OSError as error:
        raise ValueError("%s: %s" % (path, error.strerror))
    if not stat.S_ISREG(status.st_mode):
        raise ValueError("%s: not a regular file (a directory, a FIFO or a device)" % path)
    if status.st_size > INPUT_LIMIT_BYTES:
        raise ValueError("%s: %d bytes, more than an input of at most 1 GiB" % (path, status.st_size))
    try:
        with open(path, newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError("%s: cannot be read as text (%s)" % (path, error))


def read_input_json(path):
    """The JSON document in the input file `path` (read_input_text's checks); ValueError naming
    the path when it is not JSON."""
    import json

    try:
        return json.loads(read_input_text(path))
    except json.JSONDecodeError as error:
        raise ValueError("%s: not valid JSON (%s)" % (path, error))
