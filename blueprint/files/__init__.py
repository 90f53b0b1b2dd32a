"""What the commands write: ``-o`` files and folders, written whole or not at all."""
