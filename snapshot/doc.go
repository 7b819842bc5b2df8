// Package snapshot makes the service's state durable: the serialised bytes of
// every configured model together with the per-partition input offsets that
// state includes. After a crash the service restores a snapshot and seeks each
// partition to the snapshot's offsets, so no event is lost and none is
// counted twice. The package knows nothing about models beyond their names,
// type strings and bytes, and imports nothing of the project's.
//
// There are two stores with the same content:
//
//   - FileStore keeps the newest K snapshots as files in a directory.
//   - ChangelogStore keeps the latest snapshot in a compacted Kafka topic, so a
//     pod without local disk can restore from Kafka alone.
//
// Both verify everything they read; bad data is reported, never returned.
// VersionStore (versions.go) keeps versions of single models, each a
// snapshot file of its own, and the rollback requests made offline.
//
// # Guarantees
//
// FileStore.Save writes a temp file in the target directory, fsyncs it,
// renames it to its final name and fsyncs the directory; it returns only when
// the snapshot is durable, and a crash at any point leaves either the old set
// of snapshots or the old set plus the new one (plus a temp file that the
// next OpenFileStore deletes). LoadLatest returns the newest file that
// verifies and reports the newer ones it skipped.
//
// ChangelogStore.Save returns only when every record is acknowledged by all
// in-sync replicas (acks=all). A crash between the records of one save, even
// followed by compaction, leaves the previous snapshot restorable.
//
// Performance target: a 50 MB snapshot must encode and become durable well
// within the 5 s snapshot interval; the aim is under 0.5 s on a 2-core
// machine. See BenchmarkEncode50MB and BenchmarkFileStoreSave50MB.
//
// # File format, version 1
//
// Files are named snapshot-<Seq as 20 decimal digits>.snap (FileName), so
// names sort like sequence numbers; temp files start with ".tmp-snapshot-".
// All integers are little-endian. A string is a u32 byte length followed by
// the bytes. CRCs are CRC-32C (Castagnoli).
//
//	Prefix (16 bytes)
//	  [8]  magic            "STRMSNAP"
//	  u32  format version   1
//	  u32  H                length of the header body
//	Header body (H bytes)
//	  u64  seq
//	  i64  created_at       Unix seconds
//	  u32  created_at       nanoseconds, 0..999999999 (restored in UTC)
//	  str  fingerprint      at most 1024 bytes
//	  u32  offset count
//	       per offset:  str topic (1..249 bytes), i32 partition, i64 next offset
//	  u32  model count
//	       per model:   str name (1..255 bytes), str type (0..255 bytes),
//	                    str config fingerprint (0..1024 bytes),
//	                    u64 data length, u32 CRC of the data
//	u32  header CRC       over prefix and header body
//	Model data            each model's bytes in header order, back to back
//	Trailer (16 bytes)
//	  u64  content length   number of bytes before the trailer
//	  u32  content CRC      over all bytes before the trailer
//	  [4]  end magic        "ENDS"
//
// The header CRC lets a reader trust the model table before touching the
// data; the per-model CRCs let `streamer snapshot inspect` name the bad model;
// the trailer detects truncation and any other change. Decode checks all of
// them and, if the header is intact, reports every bad part (errors.Join of
// *CorruptError, each wrapping ErrCorrupt). Readers dispatch on the format
// version: each version ever written keeps its own decoder, so files written
// by older binaries keep loading. A newer version than FormatVersion gives
// ErrUnsupportedVersion.
//
// # Changelog topic layout, record version 1
//
// One partition, cleanup.policy=compact. The store writes into one of two
// generations, 0 and 1; each generation holds a complete snapshot:
//
//	key "<model>@<gen>#<i>"   chunk i of the model's bytes (at most 512 KiB)
//	  [4]  magic "SNCK"
//	  u32  record version 1
//	  u64  seq
//	  u32  chunk index i
//	  u32  chunk count
//	  ...  payload
//	  u32  CRC of all bytes before it
//
//	key "_manifest@<gen>"     the snapshot's metadata, written last
//	  [4]  magic "SNMF"
//	  u32  record version 1
//	  u8   gen
//	  u64  seq
//	  i64, u32  created_at (seconds, nanoseconds)
//	  str  fingerprint
//	  u32  offset count, offsets as in the file format
//	  u32  model count
//	       per model: str name, str type, str fingerprint, u32 chunk count, u64 length,
//	                  u32 CRC of the whole model data
//	  u32  CRC of all bytes before it
//
// Keys are parsed from the right, so model names may contain '@' and '#'.
//
// Save writes all chunks of every model into the generation that the newest
// restorable snapshot does not use, waits until they are acknowledged, then
// writes that generation's manifest. Chunk keys of that generation that the
// new manifest no longer references are then deleted with tombstones.
//
// Restore reads the partition from its start to its end offset, keeps the
// latest value per key (what compaction keeps), and returns the newest
// manifest (by seq, then log position) whose chunks are all present, carry
// its seq, index and count, pass their CRCs, and add up to the model's length
// and CRC.
//
// Why this is always consistent: a Save only overwrites the generation that
// the last restorable snapshot does not use, so that snapshot's manifest and
// chunks are untouched until a newer manifest is durable. A crash between the
// records of a save leaves chunks of the new seq beside the old manifest of
// that generation; they fail the seq check and restore falls back to the
// other generation. Compaction keeps the latest record per key, which is
// exactly the view restore works from, so compaction changes nothing. The
// generation is chosen by the store, not derived from seq, so gaps in seq and
// a save whose manifest was written but not acknowledged are safe too. Only
// one process may write to a topic at a time.
//
// Restore holds the latest records of both generations in memory, about
// twice the snapshot size.
//
// # The caller's own records
//
// Beside the snapshots the topic may hold records of the caller's own
// (PutRecords), keyed under RecordsPrefix ("k/...": the service keeps one
// per key-scoped model and entity key there, so that compaction keeps each
// key's newest state). Their value is
//
//	[4]  magic "SREC"
//	u32  CRC of the payload
//	...  payload
//
// The snapshot readers and Tail pass over them (they cost no memory however
// many there are); ScanRecords reads the topic and returns those under a
// prefix, verified, in log order.
package snapshot
