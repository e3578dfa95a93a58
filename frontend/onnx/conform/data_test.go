package conform

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"tofuc/frontend/onnx/onnxpb"
)

// A data set's numbered files end at the first missing one, but a file
// whose external data is missing is an error of the data set (the
// reader's error wraps the missing file's; neither may be taken for the
// other).
func TestDataSetMissingExternalData(t *testing.T) {
	dir := t.TempDir()
	external := &onnxpb.TensorProto{
		Dims:         []int64{2},
		DataType:     proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
		DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
		ExternalData: []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String("missing.bin")}},
	}
	set := filepath.Join(dir, "test_data_set_0")
	writeProto(t, filepath.Join(set, "input_0.pb"), floats([]int64{2}, 1, 2))
	got, err := readNumbered(filepath.Join(set, "input_%d.pb"), nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("readNumbered of one file: %d files, %v", len(got), err)
	}
	writeProto(t, filepath.Join(set, "input_1.pb"), external)
	if got, err := readNumbered(filepath.Join(set, "input_%d.pb"), nil); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Errorf("readNumbered of a file with missing external data: %d files, %v", len(got), err)
	}

	writeProto(t, filepath.Join(dir, "m_output_0.pb"), floats([]int64{2}, 1, 2))
	sets, err := dataSets(filepath.Join(dir, "m.onnx"), nil)
	if err != nil || len(sets) != 1 || len(sets[0].inputs) != 0 {
		t.Fatalf("dataSets without m_input_0.pb: %v, %v", sets, err)
	}
	writeProto(t, filepath.Join(dir, "m_input_0.pb"), external)
	if _, err := dataSets(filepath.Join(dir, "m.onnx"), nil); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Errorf("dataSets with m_input_0.pb's external data missing: %v", err)
	}
}
