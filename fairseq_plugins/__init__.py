"""fairseq plugin: speculative (SpecDec/GAD), aggressive (IAD), Jacobi and double-token
decoding.  Use it with ``--user-dir fairseq_plugins``.

fairseq auto-imports only ``tasks/`` and ``models/`` of a user dir; everything else that
registers itself (criterions, decoders) is imported here, decoders before the task.
"""
import fairseq_plugins_compat  # noqa: F401  (shims; normally already active via the .pth)

from fairseq_plugins import criterions, decoding, models, tasks  # noqa: F401,E402
