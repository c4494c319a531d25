"""Label strings as client_python writes them (names sorted, values escaped), built once.

A node's and each of its chains' label strings are kept while the node's name and labels
stay the same (every node or chain family uses them); the rarer label sets (error counters,
info, consensus, features, leaders) are filled into a :class:`Template` per set of label
names, shared by every node with the same names: a node binds its own values into it once
per family and render (:meth:`NodeLabels.filler`), and the values every node repeats
(council keys, endpoints, reasons, feature names) are escaped once per render
(:class:`Escapes`), so a sample costs one ``str.format``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from exporter.model.snapshot import NodeStatus

#: Fills the varying label values (already escaped) of one node's label set.
Filler = Callable[..., str]


def escape(value: str) -> str:
    """A label value as the exposition formats quote it (backslash, newline, quote)."""
    if "\\" not in value and "\n" not in value and '"' not in value:
        return value
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def label_string(labels: Iterable[tuple[str, str]]) -> str:
    """``{a="1",b="2"}`` with names sorted, as client_python writes them; empty for none."""
    items = sorted(labels)
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in items) + "}" if items else ""


class Template:
    """The label string for a set of label names, values filled in later: the names sorted
    as client_python writes them. One per set of names, shared by every node with them."""

    __slots__ = ("format",)

    def __init__(self, names: tuple[str, ...]) -> None:
        order = sorted(range(len(names)), key=names.__getitem__)
        pairs = ",".join(f'{_literal(names[index])}="{{{index}}}"' for index in order)
        self.format = "{{" + pairs + "}}"


def _literal(text: str) -> str:
    """``text`` as literal text of a ``str.format`` template."""
    return text.replace("{", "{{").replace("}", "}}")


class NodeLabels:
    """One node's label names and escaped values, its label string and its chains'; kept
    while the node's name and labels stay the same."""

    __slots__ = ("chains", "config_labels", "labels", "names", "values")

    def __init__(self, name: str, config_labels: tuple[tuple[str, str], ...]) -> None:
        self.config_labels = config_labels
        self.names = ("node", *(k for k, _ in config_labels))
        self.values = (escape(name), *(escape(v) for _, v in config_labels))
        self.labels = label_string((("node", name), *config_labels))
        self.chains: dict[str, str] = {}

    def chain(self, blockchain: str, templates: Templates) -> str:
        """The label string of the node's ``blockchain`` series."""
        text = self.chains.get(blockchain)
        if text is None:
            text = self.chains[blockchain] = self.with_labels(
                templates, ("blockchain",), (blockchain,)
            )
        return text

    def with_labels(
        self, templates: Templates, names: tuple[str, ...], values: tuple[str, ...]
    ) -> str:
        """The node's labels and ``names`` = ``values``, as a label string."""
        return self.filler(templates, names)(*(escape(v) for v in values))

    def filler(self, templates: Templates, names: tuple[str, ...], *escaped: str) -> Filler:
        """The label string of the node's series with ``names``, as a function of their
        escaped values; the first ones may be given now (a chain's for all its leaders).
        Made once per node and family, so each sample costs one ``str.format``."""
        return partial(templates.get(self.names + names).format.format, *self.values, *escaped)

    def forget_chains_beyond(self, node: NodeStatus) -> None:
        """Drop the strings of chains ``node`` no longer has."""
        if len(self.chains) > len(node.chains):
            current = {chain.blockchain for chain in node.chains}
            self.chains = {k: v for k, v in self.chains.items() if k in current}


class Escapes(dict[str, str]):
    """Label values escaped during one render, each once: council keys, endpoints, reasons
    and feature names repeat on every node. Bounded: values past :data:`ESCAPES_KEPT` are
    escaped each time."""

    def __missing__(self, value: str) -> str:
        text = escape(value)
        if len(self) < ESCAPES_KEPT:
            self[value] = text
        return text


#: Escaped label values an :class:`Escapes` keeps (a render of 3000 chains has a few dozen).
ESCAPES_KEPT = 4096


class Templates:
    """The templates made so far, by label names (a handful: one per label-name set)."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, ...], Template] = {}

    def get(self, names: tuple[str, ...]) -> Template:
        template = self._made.get(names)
        if template is None:
            template = self._made[names] = Template(names)
        return template
