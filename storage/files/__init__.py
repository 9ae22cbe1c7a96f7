"""One class per on-disk file, over the shared mechanics of a mapped, preallocated,
reference-counted file (`mapped_file.py`): commit log segments, consume queue files, index
files, the checkpoint, the published watermarks, the lock and abort marker, group offsets."""
