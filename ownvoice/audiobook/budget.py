"""The most text one book may have, counted while a reader extracts it.

20 million characters is about twice the longest novel on record (Proust's In Search of Lost
Time, some 9.6 million) and some 350 hours of speech at the planner's pace. A file with more
is not a book to read aloud in one go, or it is a bomb -- an archive or PDF that unpacks small
bytes into endless text -- and counting as the text comes out stops it with memory still small,
where a check on the finished Book would come after all of it had been built.
"""

from __future__ import annotations

from ownvoice.errors import InvalidInput

MAX_BOOK_CHARS = 20_000_000


class TextBudget:
    def __init__(self, path: str, limit: int = MAX_BOOK_CHARS):
        self.path, self.limit, self.used = path, limit, 0

    def spend(self, chars: int) -> None:
        """Count `chars` more characters of text; raise InvalidInput once past the limit."""
        self.used += chars
        if self.used > self.limit:
            raise InvalidInput(
                f"{self.path}: more than {self.limit:,} characters of text, about twice the "
                "longest novel; split it into parts and read each on its own"
            )
