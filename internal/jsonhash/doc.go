// Package jsonhash hashes values the way the engine hashed their JSON:
// the SHA-256 of exactly the bytes encoding/json.Marshal writes (map keys
// sorted), streamed into the hash instead of built as a whole document.
// The engine hashes inputs and outputs on every reconcile (the template
// memory's key, the applied hash of each child, the status it wrote);
// for the values those are made of (maps, lists, strings, numbers,
// booleans) this writes the JSON without encoding/json's reflection, and
// hands anything else to encoding/json, so the bytes are the same.
//
// Append writes the same JSON, but so that it decodes back to the very Go
// values it was written from: the engine keeps its cached parents' spec
// and status as such bytes (engine/parentcache.go).
package jsonhash
