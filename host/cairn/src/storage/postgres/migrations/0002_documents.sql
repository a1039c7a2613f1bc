-- Documents of the home's own, by name (hook-failures.jsonl): what a directory home keeps as
-- files at its top level.
CREATE TABLE cairn_documents (
    name text PRIMARY KEY,
    body bytea NOT NULL
);
