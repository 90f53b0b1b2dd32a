"""sbatch scripts in: the ``#SBATCH`` options that decide where a Slurm job may run.

A file is an sbatch script when its first line is a shebang and it has ``#SBATCH`` lines. sbatch reads those lines
as command-line options until the first line that is neither blank nor a comment; later ``#SBATCH`` lines are
plain comments (sbatch(1), DESCRIPTION). Each line is split as sbatch's ``get_argument`` splits it: on whitespace,
with quotes grouping, a backslash escaping, and an unescaped ``#`` starting a comment (slurm src/sbatch/opt.c, read
at SchedMD/slurm 284c3b95 on 2026-12-02). Options are GNU getopt's: ``--opt=value``, ``--opt value``, ``-o value``,
``-ovalue``; a later option overrides an earlier one.

Values are parsed as Slurm parses them: times in minutes (``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``,
``days-hours``, ``days-hours:minutes``, ``days-hours:minutes:seconds``; seconds round up; ``0``, ``-1``,
``INFINITE`` and ``UNLIMITED`` ask for no limit: slurm src/common/parse_time.c ``time_str2mins``, slurm_opt.c
``arg_set_time_limit``); ``--nodes=min[-max]``; ``--gres=gpu[:type]:N`` per node; ``--gpus=[type:]N`` per job,
``--gpus-per-node`` and ``--gpus-per-task=[type:]N``; memory in MiB (``--mem``, ``--mem-per-cpu``, ``--mem-per-gpu``:
megabytes, or a K, M, G or T suffix; ``--mem=0`` is all of each node's). A value sbatch would refuse is a
:class:`SbatchError` (``blueprint admit`` exits 2 on it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from blueprint.admit.sbatch_images import Image, scan

DIRECTIVE = "#SBATCH"
INFINITE = math.inf

# Short options and the long option each stands for.
SHORT = {"A": "account", "p": "partition", "N": "nodes", "G": "gpus", "t": "time", "n": "ntasks",
         "c": "cpus-per-task", "J": "job-name", "o": "output", "e": "error", "D": "chdir", "C": "constraint",
         "q": "qos", "w": "nodelist", "x": "exclude", "d": "dependency", "a": "array", "b": "begin", "L": "licenses",
         "M": "clusters", "S": "core-spec", "i": "input", "m": "distribution", "B": "extra-node-info",
         "F": "nodefile", "H": "hold", "O": "overcommit", "s": "oversubscribe", "Q": "quiet", "v": "verbose",
         "W": "wait", "k": "no-kill", "h": "help", "V": "version"}
# Options that take no value, or one only after "=" (getopt's optional arguments).
FLAGS = {"exclusive", "requeue", "no-requeue", "hold", "overcommit", "oversubscribe", "contiguous", "spread-job",
         "use-min-nodes", "quiet", "verbose", "wait", "parsable", "test-only", "ignore-pbs", "no-kill",
         "get-user-env", "nice", "propagate", "help", "usage", "version", "kill-on-invalid-dep"}
# Options with a value that admit reads; any other option is listed as not checked.
CHECKED = {"account", "partition", "nodes", "gpus", "gpus-per-node", "gpus-per-task", "gres", "time", "ntasks",
           "ntasks-per-node", "cpus-per-task", "cpus-per-gpu", "mem", "mem-per-cpu", "mem-per-gpu", "exclusive",
           "job-name", "qos", "requeue", "no-requeue", "signal", "container-image"}
# Options that say nothing about where the job may run (output files, mail, names of things): not worth a note.
QUIET = {"output", "error", "input", "open-mode", "mail-type", "mail-user", "comment", "chdir", "export",
         "export-file", "parsable", "quiet", "verbose", "wait", "get-user-env", "propagate", "kill-on-invalid-dep",
         "dependency", "hold", "no-kill", "wckey", "test-only", "ignore-pbs"}

_TIME_FORMATS = (
    (re.compile(r"^([0-9]+)$"), ("m",)),
    (re.compile(r"^([0-9]+):([0-9]+)$"), ("m", "s")),
    (re.compile(r"^([0-9]+):([0-9]+):([0-9]+)$"), ("h", "m", "s")),
    (re.compile(r"^([0-9]+)-([0-9]+)$"), ("d", "h")),
    (re.compile(r"^([0-9]+)-([0-9]+):([0-9]+)$"), ("d", "h", "m")),
    (re.compile(r"^([0-9]+)-([0-9]+):([0-9]+):([0-9]+)$"), ("d", "h", "m", "s")),
)
# Digits are ASCII 0-9 only: Slurm reads numbers with strtol, which stops at a fullwidth "\uff12", an Arabic-Indic
# "\u0663" or a superscript, where Python's \d and int() would read the first two as 2 and 3.
_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_COUNT = re.compile(r"^([0-9]+)([kKmM]?)$")


class SbatchError(ValueError):
    """A script sbatch itself would refuse: an unmatched quote, a value it cannot parse, options that exclude each
    other."""


@dataclass(frozen=True)
class Gpus:
    """A GPU request: how many, and of which type (Slurm's GRES type name), if any."""

    count: int
    type: str | None = None

    def show(self) -> str:
        """``type:count`` or ``count``."""
        return f"{self.type}:{self.count}" if self.type else str(self.count)


@dataclass
class SbatchJob:
    """One sbatch script: its options as sbatch reads them, parsed."""

    source: str  # the path as given
    name: str  # --job-name, else the script's file name (Slurm's default job name)
    options: dict[str, str | None] = field(default_factory=dict)  # long name -> value (None: a flag), last wins
    given: list[str] = field(default_factory=list)  # the options as written, for the report
    notes: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)  # empty: the default partition
    account: str | None = None
    min_nodes: int | None = None
    max_nodes: int | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    cpus_per_gpu: int | None = None
    mem_mib: int | None = None  # --mem per node, MiB; 0: all of each node's memory
    mem_per_cpu_mib: int | None = None
    mem_per_gpu_mib: int | None = None
    gpus: Gpus | None = None  # per job (-G/--gpus)
    gpus_per_node: Gpus | None = None  # --gpus-per-node or --gres=gpu
    gpus_per_task: Gpus | None = None
    time_minutes: float | None = None  # None: the partition's DefaultTime; INFINITE: no limit asked
    exclusive: bool = False
    qos: str | None = None
    images: list[Image] = field(default_factory=list)  # pyxis's --container-image, #SBATCH's and each srun's
    bare_sruns: list[str] = field(default_factory=list)  # file:line of the sruns that run outside a container

    @property
    def time_text(self) -> str:
        """The time limit as written."""
        return str(self.options.get("time") or "")


def split_arguments(text: str, where: str) -> list[str]:
    """A directive line's arguments, split as sbatch's ``get_argument`` does."""
    out: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return out
        arg: list[str] = []
        started = False
        quote = ""
        while i < n and (quote or not text[i].isspace()):
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                arg.append(text[i + 1])
                started = True
                i += 2
                continue
            if quote:
                if ch == quote:
                    quote = ""
                else:
                    arg.append(ch)
                i += 1
                continue
            if ch in "\"'":
                quote = ch
                started = True
                i += 1
                continue
            if ch == "#":  # an unescaped # starts a comment: the rest of the line
                i = n
                break
            arg.append(ch)
            started = True
            i += 1
        if quote:
            raise SbatchError(f"{where}: unmatched {quote} (sbatch refuses the script)")
        if started:
            out.append("".join(arg))
        if i >= n:
            return out


def directives(text: str, shown: str) -> tuple[list[tuple[int, list[str]]], list[int]]:
    """The ``#SBATCH`` lines sbatch reads ((line number, arguments)) and those it ignores because they follow the
    first command (line numbers)."""
    read: list[tuple[int, list[str]]] = []
    ignored: list[int] = []
    done = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(DIRECTIVE):
            if done:
                ignored.append(number)
            else:
                read.append((number, split_arguments(line[len(DIRECTIVE):], f"{shown}:{number}")))
            continue
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            done = True
    return read, ignored


def is_sbatch_script(text: str) -> bool:
    """A shebang on the first line and at least one ``#SBATCH`` line."""
    return text.startswith("#!") and any(line.startswith(DIRECTIVE) for line in text.splitlines())


def _options(read: list[tuple[int, list[str]]], shown: str) -> tuple[dict[str, str | None], list[str],
                                                                        dict[str, str]]:
    """(long name -> value, the options as written, long name -> where it was given)."""
    options: dict[str, str | None] = {}
    given: list[str] = []
    where: dict[str, str] = {}
    for number, args in read:
        at = f"{shown}:{number}"
        i = 0
        while i < len(args):
            arg = args[i]
            i += 1
            value: str | None
            if arg.startswith("--") and len(arg) > 2:
                name, eq, value = arg[2:].partition("=")
                if not eq:
                    value = None
                    if name not in FLAGS:
                        if i < len(args) and not args[i].startswith("-"):
                            value = args[i]
                            i += 1
                        elif name in CHECKED:
                            raise SbatchError(f"{at}: --{name} needs a value")
            elif arg.startswith("-") and len(arg) > 1:
                letter = arg[1]
                name = SHORT.get(letter, letter)
                value = arg[2:] or None
                if value is None and name not in FLAGS:
                    if i < len(args):
                        value = args[i]
                        i += 1
                    elif name in CHECKED:
                        raise SbatchError(f"{at}: -{letter} needs a value")
            else:
                raise SbatchError(f"{at}: {arg!r} is not an option (sbatch: \"Invalid directive found in batch "
                                  "script\")")
            options[name] = value
            where[name] = at
            given.append(f"--{name}" + (f"={value}" if value is not None else ""))
    return options, given, where


def parse_time(text: str, at: str) -> float:
    """Minutes, as Slurm reads a time limit (module docstring); :data:`INFINITE` for no limit."""
    if text.upper() in ("-1", "INFINITE", "UNLIMITED"):
        return INFINITE
    for pattern, units in _TIME_FORMATS:
        match = pattern.fullmatch(text)
        if match:
            seconds = sum(int(v) * _SECONDS[u] for v, u in zip(match.groups(), units, strict=True))
            minutes = math.ceil(seconds / 60)
            return INFINITE if minutes == 0 else minutes
    raise SbatchError(f"{at}: --time={text}: not a Slurm time (minutes, minutes:seconds, hours:minutes:seconds, "
                      "days-hours, days-hours:minutes, days-hours:minutes:seconds); sbatch says \"Invalid --time "
                      "specification\"")


def _count(text: str, what: str, at: str) -> int:
    match = _COUNT.fullmatch(text)
    if not match:
        raise SbatchError(f"{at}: {what}={text}: not a count (digits 0-9, then optionally k or m, as sbatch reads "
                          "it)")
    return int(match.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2}[match.group(2).lower()]


_SIZE = re.compile(r"^([0-9]+)(?:([kKmMgGtT])[bB]?)?$")
# Slurm's str_to_mbytes (src/common/proc_args.c, read at SchedMD/slurm on 2026-12-02): a count in megabytes (MiB), or
# with a suffix K, M, G or T (then optionally B); kilobytes round up to the next megabyte.
_SIZE_MIB = {"": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def parse_size_mib(text: str, what: str, at: str) -> int:
    """MiB, as Slurm reads ``--mem``, ``--mem-per-cpu`` and ``--mem-per-gpu`` (default unit megabytes)."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise SbatchError(f"{at}: {what}={text}: not a memory size (digits 0-9, then optionally K, M, G or T; "
                          "megabytes without one); sbatch says \"Invalid memory specification\"")
    number, unit = int(match.group(1)), (match.group(2) or "").lower()
    return -(-number // 1024) if unit == "k" else number * _SIZE_MIB[unit]


def _nodes(text: str, at: str) -> tuple[int, int]:
    """``N``, ``min-max`` or a comma list of counts: (min, max)."""
    if "," in text:
        counts = [_count(part, "--nodes", at) for part in text.split(",")]
        return min(counts), max(counts)
    low, dash, high = text.partition("-")
    if not low:
        raise SbatchError(f"{at}: --nodes={text}: not a node count (min[-max], at least 1)")
    first = _count(low, "--nodes", at)
    last = _count(high, "--nodes", at) if dash else first
    if first < 1 or last < first:
        raise SbatchError(f"{at}: --nodes={text}: not a node count (min[-max], at least 1)")
    return first, last


def _gpus(text: str, what: str, at: str) -> Gpus:
    """``[type:]N``."""
    kind, colon, number = text.rpartition(":")
    return Gpus(_count(number, what, at), kind if colon and kind else None)


def _gres_gpus(text: str, at: str) -> Gpus | None:
    """The GPU entry of a ``--gres`` list (``gpu[[:type]:count]``), if any."""
    found = None
    for entry in text.split(","):
        parts = entry.split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 1:
            found = Gpus(1)
        elif len(parts) == 2:
            found = Gpus(_count(parts[1], "--gres", at)) if parts[1][:1].isnumeric() else Gpus(1, parts[1])
        elif len(parts) == 3:
            found = Gpus(_count(parts[2], "--gres", at), parts[1])
        else:
            raise SbatchError(f"{at}: --gres={text}: not gpu[[:type]:count]")
    return found


def parse_sbatch(text: str, shown: str, file_name: str) -> SbatchJob:
    """The script's options, parsed (module docstring); :class:`SbatchError` for what sbatch refuses."""
    read, ignored = directives(text, shown)
    options, given, where = _options(read, shown)
    job = SbatchJob(source=shown, name=str(options.get("job-name") or file_name), options=options, given=given)
    if ignored:
        job.notes.append(f"#SBATCH on line{'s' if len(ignored) > 1 else ''} {', '.join(map(str, ignored))} "
                         "come after the first command: sbatch ignores them (sbatch(1)); move them up")

    def value(name: str) -> str | None:
        v = options.get(name)
        if name in options and v is None:
            raise SbatchError(f"{where[name]}: --{name} needs a value")
        return v

    if (v := value("partition")) is not None:
        job.partitions = [p for p in v.split(",") if p]
    job.account = value("account")
    job.qos = value("qos")
    if (v := value("nodes")) is not None:
        job.min_nodes, job.max_nodes = _nodes(v, where["nodes"])
    for name, attr in (("ntasks", "ntasks"), ("ntasks-per-node", "ntasks_per_node"),
                       ("cpus-per-task", "cpus_per_task")):
        if (v := value(name)) is not None:
            count = _count(v, f"--{name}", where[name])
            if count < 1:
                raise SbatchError(f"{where[name]}: --{name}={v}: at least 1")
            setattr(job, attr, count)
    if (v := value("cpus-per-gpu")) is not None:
        if job.cpus_per_task is not None:
            raise SbatchError(f"{where['cpus-per-gpu']}: --cpus-per-gpu and --cpus-per-task exclude each other "
                              "(sbatch(1), --cpus-per-gpu)")
        job.cpus_per_gpu = _count(v, "--cpus-per-gpu", where["cpus-per-gpu"])
    memory = [n for n in ("mem", "mem-per-cpu", "mem-per-gpu") if n in options]
    if len(memory) > 1:
        raise SbatchError(f"{where[memory[-1]]}: {', '.join('--' + n for n in memory)} exclude each other "
                          "(sbatch(1), --mem: \"mutually exclusive\")")
    for name, attr in (("mem", "mem_mib"), ("mem-per-cpu", "mem_per_cpu_mib"), ("mem-per-gpu", "mem_per_gpu_mib")):
        if (v := value(name)) is not None:
            setattr(job, attr, parse_size_mib(v, f"--{name}", where[name]))
    if (v := value("gpus")) is not None:
        job.gpus = _gpus(v, "--gpus", where["gpus"])
    if (v := value("gpus-per-task")) is not None:
        job.gpus_per_task = _gpus(v, "--gpus-per-task", where["gpus-per-task"])
    per_node = value("gpus-per-node")
    gres = value("gres")
    if per_node is not None and gres is not None and _gres_gpus(gres, where["gres"]) is not None:
        raise SbatchError(f"{where['gres']}: --gres=gpu and --gpus-per-node exclude each other (sbatch(1), --gres)")
    if per_node is not None:
        job.gpus_per_node = _gpus(per_node, "--gpus-per-node", where["gpus-per-node"])
    elif gres is not None:
        job.gpus_per_node = _gres_gpus(gres, where["gres"])
    if (v := value("time")) is not None:
        job.time_minutes = parse_time(v, where["time"])
    job.exclusive = "exclusive" in options and options["exclusive"] in (None, "")  # =user|mcs|topo share nodes
    steps = scan(text, shown, value("container-image"))
    job.images, job.bare_sruns = steps.images, steps.bare
    unchecked = sorted(n for n in options if n not in CHECKED and n not in QUIET)
    if unchecked:
        job.notes.append(f"not checked: {', '.join('--' + n for n in unchecked)}")
    return job
