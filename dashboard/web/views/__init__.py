"""The dashboard's pages, one module per area; every view is a thin function behind login."""
