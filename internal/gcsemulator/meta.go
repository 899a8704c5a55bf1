package gcsemulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/cuengine/engine/providers/gcs"
)

// metaFile is the name, inside Options.Dir, of the file holding the front's
// bucket records. It is a file, not a directory, so fake-gcs-server's
// filesystem backend never lists it as a bucket, and its leading dot makes it
// an invalid bucket name.
const metaFile = ".gcsemulator-buckets.json"

// metaFormat is the version of the records file's layout.
const metaFormat = 1

// GCS defaults for fields a bucket insert leaves out.
const (
	defaultLocation     = "US"
	defaultStorageClass = "STANDARD"
)

// maxLabels is the GCS limit on labels per bucket.
const maxLabels = 64

// bucketName is the GCS bucket naming rule, as fake-gcs-server applies it.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*[a-z0-9]$`)

// storageClasses are the storage classes GCS accepts for a bucket.
var storageClasses = []string{
	"STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE",
	"MULTI_REGIONAL", "REGIONAL", "DURABLE_REDUCED_AVAILABILITY",
}

// multiRegions and dualRegions are the GCS location names whose
// locationType is not "region".
var (
	multiRegions = []string{"ASIA", "EU", "US"}
	dualRegions  = []string{"ASIA1", "EUR4", "EUR5", "EUR7", "EUR8", "NAM4"}
)

// bucketMeta is what the front keeps about one bucket because
// fake-gcs-server drops it. Empty Location and StorageClass mean "as
// fake-gcs-server reports it" (a bucket the front did not see created).
type bucketMeta struct {
	Labels                   map[string]string `json:"labels,omitempty"`
	Location                 string            `json:"location,omitempty"`
	StorageClass             string            `json:"storageClass,omitempty"`
	UniformBucketLevelAccess bool              `json:"uniformBucketLevelAccess,omitempty"`
	Metageneration           int64             `json:"metageneration"`
}

// clone returns a deep copy of m.
func (m bucketMeta) clone() bucketMeta {
	m.Labels = maps.Clone(m.Labels)
	return m
}

// validate checks m against the GCS rules for labels and storage classes.
// The message is the one a GCS 400 would carry.
func (m bucketMeta) validate() error {
	if len(m.Labels) > maxLabels {
		return fmt.Errorf("a bucket can have at most %d labels, got %d", maxLabels, len(m.Labels))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		if !gcs.ValidLabelKey(k) {
			return fmt.Errorf("invalid label key %q: it must start with a lowercase letter and contain only lowercase letters, digits, '-' and '_', at most 63 characters", k)
		}
		if v := m.Labels[k]; !gcs.ValidLabelValue(v) {
			return fmt.Errorf("invalid value %q for label %q: it must contain only lowercase letters, digits, '-' and '_', at most 63 characters", v, k)
		}
	}
	if m.StorageClass != "" && !slices.Contains(storageClasses, m.StorageClass) {
		return fmt.Errorf("invalid storage class %q: it must be one of %s", m.StorageClass, strings.Join(storageClasses, ", "))
	}
	return nil
}

// locationType is the locationType GCS reports for a location.
func locationType(location string) string {
	switch {
	case slices.Contains(multiRegions, location):
		return "multi-region"
	case slices.Contains(dualRegions, location):
		return "dual-region"
	default:
		return "region"
	}
}

// metaStore holds the bucket records, and with a directory also keeps them
// in metaFile there. It is not safe for concurrent use: the front serializes
// every access.
type metaStore struct {
	path    string // "" = memory only
	buckets map[string]bucketMeta
}

// metaFileContent is the layout of metaFile.
type metaFileContent struct {
	Format  int                   `json:"format"`
	Buckets map[string]bucketMeta `json:"buckets"`
}

// newMetaStore returns a store in memory when dir is empty, else one kept in
// dir/metaFile, loaded from there if the file exists.
func newMetaStore(dir string) (*metaStore, error) {
	s := &metaStore{buckets: map[string]bucketMeta{}}
	if dir == "" {
		return s, nil
	}
	s.path = filepath.Join(dir, metaFile)
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("reading bucket records: %w", err)
	}
	var content metaFileContent
	if err := json.Unmarshal(data, &content); err != nil {
		return nil, fmt.Errorf("reading bucket records %s: %w", s.path, err)
	}
	if content.Format != metaFormat {
		return nil, fmt.Errorf("bucket records %s have format %d, want %d", s.path, content.Format, metaFormat)
	}
	for name, m := range content.Buckets {
		s.buckets[name] = m.clone()
	}
	return s, nil
}

// get returns a copy of the record of bucket name and whether there is one.
func (s *metaStore) get(name string) (bucketMeta, bool) {
	m, ok := s.buckets[name]
	return m.clone(), ok
}

// lookup returns the record of bucket name, or the record of a bucket the
// front never saw created: fake-gcs-server's values, metageneration 1.
func (s *metaStore) lookup(name string) bucketMeta {
	if m, ok := s.get(name); ok {
		return m
	}
	return bucketMeta{Metageneration: 1}
}

// put records m for bucket name and saves the records.
func (s *metaStore) put(name string, m bucketMeta) error {
	s.buckets[name] = m.clone()
	return s.save()
}

// remove forgets bucket name and saves the records.
func (s *metaStore) remove(name string) error {
	if _, ok := s.buckets[name]; !ok {
		return nil
	}
	delete(s.buckets, name)
	return s.save()
}

// retain forgets every bucket for which keep is false and saves the records
// if that changed anything.
func (s *metaStore) retain(keep func(name string) bool) error {
	changed := false
	for name := range s.buckets {
		if !keep(name) {
			delete(s.buckets, name)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return s.save()
}

// save writes the records to s.path, atomically: a crash leaves either the
// old or the new file.
func (s *metaStore) save() error {
	if s.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(metaFileContent{Format: metaFormat, Buckets: s.buckets}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding bucket records: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), metaFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("saving bucket records: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("saving bucket records: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("saving bucket records: %w", err)
	}
	return nil
}
