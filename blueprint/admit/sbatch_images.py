"""The container images of an sbatch script (pyxis's ``--container-image``), as admit reads them (judged in
blueprint/admit/slurm_images.py, as the cluster's pyxis importer will judge them when each step starts).

Where they are read: ``#SBATCH --container-image`` (pyxis runs the batch script itself in the container) and the
``--container-image`` of each ``srun`` command in the script's body (continued lines joined, ``;``, ``&&``, ``||``,
``|`` and ``&`` separating commands). A ``$NAME`` or ``${NAME}`` in the image is replaced by the last plain
assignment ``NAME=value`` (or ``export NAME=value``) the script makes before that line, and ``${NAME:-default}`` by
its default where the script has not set ``NAME``; an image still holding ``$`` after that is set when the
script runs, and is named as not checked. This reads a script as people write them, not as bash would run it: a
command built at run time is not seen.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
# $NAME, ${NAME}, and ${NAME:-default} / ${NAME-default} (the default where the script has not set NAME: the
# environment of whoever submits it may, which admit cannot know)
VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(:?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
SEPARATORS = {";", "&&", "||", "|", "&", ";;", "(", ")"}
OPTION = "--container-image"


@dataclass(frozen=True)
class Image:
    """One ``--container-image``: where it is written, as written, and its value once the script's variables are
    replaced (None when it depends on something only the running script knows)."""

    where: str  # file:line
    written: str
    value: str | None


def _lines(text: str) -> list[tuple[int, list[str]]]:
    """Commands' lines as words, with the number of their first line: a trailing backslash continues a line, and so
    does an open quote (a ``python -c '...'`` over several lines); comment lines dropped. A line that never splits
    (a quote left open to the end) is left out."""
    out: list[tuple[int, list[str]]] = []
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
            if line.lstrip().startswith("#"):
                continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending.append(line[:-1])  # bash drops the backslash and the newline
            continue
        pending.append(line)
        words = _words("".join(pending))
        if words is None:
            pending.append("\n")  # an open quote: the next line belongs to it
            continue
        out.append((start, words))
        pending = []
    return out


def _words(line: str) -> list[str] | None:
    """The line's words with shell punctuation apart; None when it does not split (an unmatched quote)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.commenters = ""  # "#" inside a word (enroot's REGISTRY#IMAGE) is not a comment
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


def _substitute(value: str, known: dict[str, str]) -> str:
    """``value`` with the variables the script set (or their defaults) replaced; the others left as written."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        if name in known:
            return known[name]
        return m.group(3) if m.group(2) is not None else m.group(0)

    return VARIABLE.sub(one, value)


def _expand(value: str, known: dict[str, str]) -> str | None:
    """``value`` fully known, or None."""
    out = _substitute(value, known)
    return None if "$" in out else out


# Words after which the next word is again a command (bash's reserved words), and commands that run the rest of their
# words as another command (with options of their own first: "timeout 600 srun ...").
KEYWORDS = {"then", "do", "else", "elif", "if", "while", "until", "{", "!", "time", "exec", "command", "nohup"}
WRAPPERS = {"timeout", "env", "nice", "stdbuf", "xargs", "setsid", "numactl", "taskset"}
ENV_IMAGE = "PYXIS_CONTAINER_IMAGE"  # srun's --container-image from the environment (pyxis args.c)


def _commands(words: list[str]) -> list[list[str]]:
    """A line's words split into commands at the shell's separators."""
    out: list[list[str]] = [[]]
    for word in words:
        if word in SEPARATORS:
            out.append([])
        else:
            out[-1].append(word)
    return [c for c in out if c]


def _srun_at(command: list[str]) -> int | None:
    """Where ``srun`` (any path to it) starts in the command, past reserved words, ``NAME=value`` prefixes and
    wrapping commands; None when the command is not srun."""
    i = 0
    while i < len(command) and (command[i] in KEYWORDS or ASSIGNMENT.match(command[i])):
        i += 1
    if i < len(command) and command[i].rsplit("/", 1)[-1] in WRAPPERS:
        return next((j for j in range(i + 1, len(command)) if command[j].rsplit("/", 1)[-1] == "srun"), None)
    return i if i < len(command) and command[i].rsplit("/", 1)[-1] == "srun" else None


@dataclass
class Scan:
    """What admit reads of a script's steps: the images, and where an srun runs without one."""

    images: list[Image]
    bare: list[str]  # file:line of each srun that runs its tasks outside a container


def scan(text: str, shown: str, batch_image: str | None) -> Scan:
    """Every ``--container-image`` the script gives (module docstring): ``batch_image`` is the ``#SBATCH`` one; an
    srun without one takes ``PYXIS_CONTAINER_IMAGE`` from its environment (an ``export`` in the script, or a
    ``NAME=value`` before srun), as pyxis reads its options from the environment. An srun with none runs outside a
    container, unless the batch script itself runs in one (its steps then inherit the image)."""
    bare: list[str] = []
    images: list[Image] = []
    if batch_image is not None:
        images.append(Image(f"{shown}: #SBATCH", batch_image, _expand(batch_image, {})))
    known: dict[str, str] = {}
    exported: set[str] = set()
    for number, words in _lines(text):
        for command in _commands(words):
            if all(ASSIGNMENT.match(w) for w in command):  # NAME=value ...: shell variables
                for w in command:
                    m = ASSIGNMENT.match(w)
                    assert m is not None
                    known[m.group(1)] = _substitute(m.group(2), known)
                continue
            if command[0] == "export":
                for w in command[1:]:
                    if m := ASSIGNMENT.match(w):
                        known[m.group(1)] = _substitute(m.group(2), known)
                        exported.add(m.group(1))
                    elif not w.startswith("-"):
                        exported.add(w)
                continue
            at = _srun_at(command)
            if at is None:
                continue
            written = None
            for i, word in enumerate(command[at + 1:], start=at + 1):
                if word.startswith(OPTION + "="):
                    written = word[len(OPTION) + 1:]
                elif word == OPTION and i + 1 < len(command):
                    written = command[i + 1]
            prefix = {m.group(1): m.group(2) for w in command[:at] if (m := ASSIGNMENT.match(w))}
            if written is None and ENV_IMAGE in prefix:
                written = prefix[ENV_IMAGE]
            elif written is None and ENV_IMAGE in exported and ENV_IMAGE in known:
                written = known[ENV_IMAGE]
            if written is not None:
                images.append(Image(f"{shown}:{number}", written, _expand(written, known)))
            elif batch_image is None:
                bare.append(f"{shown}:{number}")
    return Scan(images, bare)
