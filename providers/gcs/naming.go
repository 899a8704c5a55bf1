package gcs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/cuengine/engine/providers"
)

const (
	// suffixLen is the number of hex characters appended to the logical name.
	suffixLen = 8
	// minBucketNameLen and maxBucketNameLen bound a bucket name.
	minBucketNameLen = 3
	maxBucketNameLen = 63
	// MaxLogicalNameLen is the longest spec.bucketName: the physical name
	// must fit in 63 characters after "-" and the suffix are appended.
	MaxLogicalNameLen = maxBucketNameLen - 1 - suffixLen
)

// dottedDecimal matches names shaped like an IPv4 address.
var dottedDecimal = regexp.MustCompile(`^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$`)

// nameSuffix returns the deterministic suffix for an owner and attempt:
// the first eight hex characters of sha256(uid + "/" + attempt).
func nameSuffix(uid string, attempt int) string {
	sum := sha256.Sum256([]byte(uid + "/" + strconv.Itoa(attempt)))
	return hex.EncodeToString(sum[:])[:suffixLen]
}

// physicalName joins a logical name and the suffix for (uid, attempt).
func physicalName(logical, uid string, attempt int) string {
	return logical + "-" + nameSuffix(uid, attempt)
}

// logicalNameOf returns the logical part of a physical name: everything
// before the last "-".
func logicalNameOf(physical string) string {
	i := strings.LastIndexByte(physical, '-')
	if i < 0 {
		return physical
	}
	return physical[:i]
}

// validateLogicalName checks spec.bucketName against the bucket naming rules,
// with the length budgeted for the suffix. Errors are terminal InvalidName.
func validateLogicalName(name string) error {
	if len(name) > MaxLogicalNameLen {
		return providers.Terminal(providers.ReasonInvalidName,
			"spec.bucketName %q is %d characters; the longest allowed is %d because the engine appends "+
				"\"-\" and a %d-character suffix to make it globally unique, and bucket names are at most %d characters",
			name, len(name), MaxLogicalNameLen, suffixLen, maxBucketNameLen)
	}
	if err := checkNameShape(name); err != nil {
		return providers.Terminal(providers.ReasonInvalidName, "spec.bucketName %q: %w", name, err)
	}
	return nil
}

// validateBucketName checks a physical bucket name against the GCS naming
// rules. Errors are terminal InvalidName.
func validateBucketName(name string) error {
	if err := checkBucketName(name); err != nil {
		return providers.Terminal(providers.ReasonInvalidName, "bucket name %q: %w", name, err)
	}
	return nil
}

// checkBucketName applies the GCS bucket naming rules
// (https://cloud.google.com/storage/docs/buckets#naming) to name.
func checkBucketName(name string) error {
	if len(name) < minBucketNameLen || len(name) > maxBucketNameLen {
		return fmt.Errorf("must be %d to %d characters long, is %d", minBucketNameLen, maxBucketNameLen, len(name))
	}
	return checkNameShape(name)
}

// checkNameShape applies every naming rule but the length bounds; the
// logical name is checked with it, as the suffix makes the physical name
// long enough.
func checkNameShape(name string) error {
	if name == "" {
		return fmt.Errorf("must not be empty")
	}
	for i, r := range name {
		if !isNameChar(r) {
			return fmt.Errorf("character %q at position %d is not allowed: use only lowercase letters, digits, '-', '_' and '.'", r, i)
		}
	}
	if !isAlnum(rune(name[0])) || !isAlnum(rune(name[len(name)-1])) {
		return fmt.Errorf("must start and end with a lowercase letter or a digit")
	}
	if strings.Contains(name, "..") {
		return fmt.Errorf("must not contain \"..\": each dot-separated part must be non-empty")
	}
	if strings.HasPrefix(name, "goog") {
		return fmt.Errorf("must not start with \"goog\" (reserved by Google)")
	}
	if strings.Contains(name, "google") {
		return fmt.Errorf("must not contain \"google\" (reserved by Google)")
	}
	if dottedDecimal.MatchString(name) {
		return fmt.Errorf("must not be an IP address in dotted-decimal notation")
	}
	return nil
}

func isNameChar(r rune) bool {
	return isAlnum(r) || r == '-' || r == '_' || r == '.'
}

func isAlnum(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')
}
