-- Large values are compressed with lz4 where the server has it, then stored out of line only if
-- still large: JSON shrinks severalfold, so a compaction writes a fraction of the TOAST chunks (each
-- a heap row and an index entry) it did uncompressed, for less CPU than writing them costs. pglz
-- (the only other method) costs more than it saves, so a server built without lz4 keeps 0001's
-- uncompressed storage.
DO $$
BEGIN
    ALTER TABLE cairn_events ALTER COLUMN body SET COMPRESSION lz4, ALTER COLUMN body SET STORAGE EXTENDED;
    ALTER TABLE cairn_archives ALTER COLUMN entries SET COMPRESSION lz4, ALTER COLUMN entries SET STORAGE EXTENDED;
    ALTER TABLE cairn_artifacts ALTER COLUMN content SET COMPRESSION lz4, ALTER COLUMN content SET STORAGE EXTENDED;
    ALTER TABLE cairn_conversations ALTER COLUMN state SET COMPRESSION lz4, ALTER COLUMN state SET STORAGE EXTENDED;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this server has no lz4: large values stay uncompressed';
END
$$;
