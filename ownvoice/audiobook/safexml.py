"""XML from untrusted files (EPUB, .docx): no entity declarations, no external references.

An entity declared in the document's DTD is how a billion-laughs bomb multiplies a few hundred
bytes into gigabytes, and an external entity is how XXE reads local files or the network; books
need neither (an EPUB's NCX may name its DTD, which is allowed and never fetched). These are
defusedxml's rules, checked here by expat itself with no tree built, so a large document.xml
costs only the time to scan it. How large a tree may grow is bounded by the size of the part
(archive.py); python-docx's own lxml parser keeps libxml2's limits (no huge_tree) and neither
resolves entities nor touches the network.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.parsers import expat

from ownvoice.errors import InvalidInput


class _Refused(Exception):
    pass


def _refuse(*_) -> None:
    raise _Refused


def check_xml(data: bytes, path: str, name: str) -> None:
    """Raise InvalidInput if entry `name` of `path` is not well-formed XML, or declares an
    entity or refers to an external one."""
    parser = expat.ParserCreate()
    parser.EntityDeclHandler = _refuse
    parser.UnparsedEntityDeclHandler = _refuse
    parser.ExternalEntityRefHandler = _refuse
    try:
        parser.Parse(data, True)
    except _Refused:
        raise InvalidInput(
            f"{path}: unsafe XML in {name}: entity declarations and external references are "
            "not allowed"
        ) from None
    except expat.ExpatError as e:
        raise InvalidInput(f"{path}: {name} is not well-formed XML: {e}") from e


def parse_xml(data: bytes, path: str, name: str) -> ET.Element:
    """The element tree of entry `name` of `path`, checked first (check_xml)."""
    check_xml(data, path, name)
    return ET.fromstring(data)  # the same expat, on XML that has just parsed cleanly
