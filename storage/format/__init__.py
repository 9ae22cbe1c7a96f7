"""Pure codecs and the volume's names: the record, its properties, topic and host rules,
the group-commit filler, messages and put results.  No file I/O happens here."""
