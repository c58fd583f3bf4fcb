"""Objects built from a module's weights, kept while the module is unchanged (:class:`BuiltOnce`)."""
import operator
from typing import Callable, Dict

from torch import Tensor, nn


class ModuleSnapshot:
    """What objects built from a module's weights rely on: every submodule and parameter of its
    tree the same object (and no new one), every parameter unchanged as a tensor (what
    ``linears.weight_stamp`` reads: version counter and data pointer), the same training mode.
    ``unchanged()`` runs its loops in C (``map``): 20-40 us for the Multi30k verifier's decoder
    (80 parameters), where building its lean layers again costs ~0.4 ms."""

    def __init__(self, module: nn.Module):
        self.module, self.training = module, module.training
        owners = list(module.modules())
        self.tables = [owner._modules for owner in owners] + [owner._parameters for owner in owners]
        self.sizes = list(map(len, self.tables))
        members = [(table, name, member) for table in self.tables for name, member in table.items()]
        self.member_tables, self.member_names, self.members = (list(column) for column in zip(*members)) \
            if members else ([], [], [])  # self.members holds them: their ids are not reused
        self.parameters = [p for p in self.members if isinstance(p, Tensor)]
        self.versioned = [p for p in self.parameters if not p.is_inference()]  # inference tensors have no version
        self.stamps = self._stamps()

    def _stamps(self) -> tuple:
        return list(map(_VERSION, self.versioned)), list(map(Tensor.data_ptr, self.parameters))

    def unchanged(self) -> bool:
        return self.module.training == self.training and list(map(len, self.tables)) == self.sizes \
            and all(map(operator.is_, map(dict.get, self.member_tables, self.member_names), self.members)) \
            and self._stamps() == self.stamps


_VERSION = operator.attrgetter("_version")


class BuiltOnce:
    """Objects built from a module's weights (its lean layers, its fast encoder), built on the
    first batch and reused by the next ones while the module is unchanged (:class:`ModuleSnapshot`).
    One per generator (it keeps the modules it saw alive); ``clear()`` after changing weights
    in a way the snapshot does not see (through ``.data``, with the products' ``forget``)."""

    def __init__(self):
        # (what, id(module), id(linear)) -> (snapshot, linear, object); the snapshot holds the module and the
        # entry the linear factory, so that neither id is reused while the entry lives
        self.built: Dict[tuple, tuple] = {}

    def get(self, what: str, module: nn.Module, linear, build: Callable):
        key = (what, id(module), id(linear))
        entry = self.built.get(key)
        if entry is None or not entry[0].unchanged():
            entry = self.built[key] = (ModuleSnapshot(module), linear, build())
        return entry[2]

    def clear(self):
        self.built.clear()
