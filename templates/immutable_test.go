package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestImmutableFieldsBecomeCELRules(t *testing.T) {
	tmpl := loadSpec(t, "", `
		region: string @immutable()
		storage: {
			class?: string @immutable()
			size: *"1Gi" | string
		}
		mode: *"a" | "b"`)
	spec := tmpl.CRD().Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	assert.Equal(t, apiextensionsv1.ValidationRules{{Rule: "self == oldSelf", Message: "spec.region is immutable"}},
		spec.Properties["region"].XValidations)
	storage := spec.Properties["storage"]
	assert.Equal(t, apiextensionsv1.ValidationRules{{Rule: "self == oldSelf", Message: "spec.storage.class is immutable"}},
		storage.Properties["class"].XValidations)
	assert.Equal(t, apiextensionsv1.ValidationRules{{Rule: "!has(oldSelf.class) || has(self.class)", Message: "spec.storage.class is immutable: once set it cannot be removed"}},
		storage.XValidations)
	assert.Empty(t, storage.Properties["size"].XValidations)
	assert.Empty(t, spec.Properties["mode"].XValidations)
	assert.Empty(t, spec.XValidations)
	assert.False(t, tmpl.NeedsAdmission(), "immutability is the apiserver's own check, no webhook")
}

func TestImmutableRefused(t *testing.T) {
	for _, tc := range []struct{ name, spec, want string }{
		{name: "in a list item", spec: `
		ports: [...{port: int @immutable()}]`,
			want: "w.cue:8:15: parent.spec.ports[].port: @immutable() cannot apply inside a list: the apiserver cannot pair a list's old and new items"},
		{name: "with arguments", spec: `
		region: string @immutable(true)`,
			want: "w.cue:8:3: parent.spec.region: @immutable() takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := "package w\n\nparent: {\n\tapiVersion: \"x.dev/v1\"\n\tkind: \"W\"\n\tspec: {\n" + tc.spec + "\n\t}\n}\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "w.cue"), []byte(src), 0o644))
			_, err := Load(dir)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
