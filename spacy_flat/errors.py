"""Exceptions raised by spacy-flat, each naming the file, line or doc at fault."""


class FlatError(ValueError):
    """Base class for spacy-flat errors."""


class LexiconError(FlatError):
    """A lexicon or vector file, or a lexicon operation, is invalid."""


class ConversionError(FlatError):
    """An annotated corpus file cannot be read."""


class PipelineFileError(FlatError):
    """A saved pipeline is missing a file or holds a damaged one."""


class AssetError(FlatError):
    """A project asset is missing or does not match its checksum."""
