"""How a verb call's record is stored in PostgreSQL: one module per stored format, none of them touching the database.

- ``packed_json``: a large JSON value packed (zstd, base64) inside its ``jsonb`` column, and ``PackedJSONField``,
  which packs and unpacks it (calls without a body, and every call recorded before migration 0004);
- ``call_body``: the binary body of a per-node record and its answer (``VerbCall.body``, formats 1 and 2), and the
  reference a prioritize body makes to its cycle's filter call;
- ``columns``: the numeric columns inside a body (shuffled floats, decimal text, columns predicted from others);
- ``shared_parts``: a filter's per-node lists, stored once for every filter that has them (``SharedPart`` rows) and
  named in each body by digest;
- ``identity_cache``: values derived from the spool reader's shared objects, made once per object.

Reading a body needs other stored rows (a referenced filter call, a shared part): its caller passes where to find
them. The database's side is ``dashboard.models`` (``VerbCall``, ``shared_part_data``), which imports
``packed_json`` for its field; nothing here imports the models.
"""
