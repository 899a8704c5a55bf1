package openapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ReadCRDs reads the CustomResourceDefinitions of the .yaml, .yml and .json
// files under dir (multi-document files too; documents of other kinds are
// skipped), for LoadOptions.CRDs: the schemas of child kinds that neither
// Kubernetes nor the templates define.
func ReadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read CRDs: %w", err)
	}
	sort.Strings(files)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		crds, err := readCRDFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	return out, nil
}

func readCRDFile(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read CRDs: %w", err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		var head struct{ APIVersion, Kind string }
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if head.Kind != "CustomResourceDefinition" || head.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := json.Unmarshal(raw, &crd); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		out = append(out, &crd)
	}
}
