"""Traditional characters read as simplified ones, one character for one, so offsets never move.

The lexicons, the character tables and the training corpora are in simplified script: a traditional text
such as 習近平在北京人民大會堂會見了美國國務卿 matches few lexicon words and reads rarer rows. With
`normalize_script`, the model reads each character through OpenCC's traditional-to-simplified character
table (`t2s`, one character at a time, never its phrase rules, which may change the length); `doc.text`
and the entities' offsets stay the text's own. Of the 4,221 characters the table changes, three occur in
MSRA's 2.2 million training characters (乾 15 times, 吒 twice, 捱 once), so simplified text reads as before.
"""

from functools import lru_cache
from typing import Dict

from ..errors import FlatError

# The CJK blocks the table is read over: Extension A, the unified ideographs and the compatibility ones.
CJK_BLOCKS = ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0xF900, 0xFB00))


@lru_cache(maxsize=1)
def simplified_table() -> Dict[int, str]:
    """RETURNS (Dict[int, str]): A `str.translate` table from each traditional character that OpenCC's
    `t2s` changes to its one simplified character (about 4,200 entries; built in well under a second)."""
    try:
        import opencc
    except ImportError:
        raise FlatError(
            "normalize_script reads traditional characters through OpenCC: pip install 'spacy-flat[scripts]'"
        ) from None
    converter = opencc.OpenCC("t2s")
    table: Dict[int, str] = {}
    for low, high in CJK_BLOCKS:
        for codepoint in range(low, high):
            char = chr(codepoint)
            simplified = converter.convert(char)
            # One character for one: a longer or empty result would move every later offset.
            if simplified != char and len(simplified) == 1:
                table[codepoint] = simplified
    return table


def read_as_simplified(text: str) -> str:
    """RETURNS (str): `text` with each traditional character replaced by its simplified one; the same length."""
    return text.translate(simplified_table())
