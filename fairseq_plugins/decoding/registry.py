"""Name -> generator builder, filled by the decoder modules as they are imported."""
DECODERS = {}


def register_decoder(name, help):
    """Decorator registering ``build(task, models, args, **kwargs) -> generator`` as ``name``."""

    def wrapper(build):
        if name in DECODERS:
            raise ValueError(f"decoder {name!r} is registered twice")
        DECODERS[name] = (build, help)
        return build

    return wrapper


def decoder_names():
    return ["beam", *DECODERS]
