package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestWriteKueueAdmissionSVG(t *testing.T) {
	report := map[string]any{
		"workload":         "kueue-baseline",
		"mean_admission_s": map[string]any{"large": 0.12, "medium": 39.4, "small": 57.9},
		"ideal":            map[string]any{"mean_admission_s": map[string]any{"large": 0.0, "medium": 38.7, "small": 55.2}},
	}
	var buf bytes.Buffer
	if err := WriteKueueAdmissionSVG(&buf, report, KueueBaselinePublished); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, nine bars, each class and each value labelled.
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	bars := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, buf.String())
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "fill" && a.Value != "white" {
					bars++
				}
			}
		}
	}
	if want := 9 + 3; bars != want { // 9 bars and 3 legend swatches
		t.Errorf("%d coloured rects, want %d", bars, want)
	}
	for _, s := range []string{">large<", ">medium<", ">small<", ">215<", ">0.12<", ">39.4<", "Kueue (published)"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("chart lacks %q", s)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{43, 50}, {10, 10}, {0.13, 0.2}, {2.5, 5}, {0, 1}} {
		if got := niceStep(tc.in); got != tc.want {
			t.Errorf("niceStep(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
