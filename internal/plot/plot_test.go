package plot

import (
	"bytes"
	"image/png"
	"math"
	"strings"
	"testing"
)

func TestLineChartRendersBothForms(t *testing.T) {
	c := &Chart{Title: "mean reward <by version>", XLabel: "version", YLabel: "reward",
		Series: []Series{{Name: "mean", X: []float64{0, 1, 2, 3}, Y: []float64{-1, -0.5, math.NaN(), 0.25}}}}
	svg := c.SVG(400, 300)
	if !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, "mean reward &lt;by version&gt;") {
		t.Fatalf("svg lacks root or escaped title: %.200s", svg)
	}
	// 3 points drawn as dots, the NaN one skipped, and one segment (the gap
	// breaks the line between version 1 and 3).
	if n := strings.Count(svg, "<circle"); n != 3 {
		t.Fatalf("%d dots, want 3", n)
	}
	if n := strings.Count(svg, `stroke-width="2"`); n != 1 {
		t.Fatalf("%d data segments, want 1", n)
	}
	b, err := c.PNG(400, 300)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != 400 || img.Bounds().Dy() != 300 {
		t.Fatalf("png is %v", img.Bounds())
	}
	// The series colour must appear in the PNG: the data was drawn.
	found := false
	for y := 0; y < 300 && !found; y++ {
		for x := 0; x < 400; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == Palette[0].R && uint8(g>>8) == Palette[0].G && uint8(b>>8) == Palette[0].B {
				found = true
				break
			}
		}
	}
	if !found {
		t.Fatal("no pixel of the series colour in the PNG")
	}
}

func TestBarChartAndEmpty(t *testing.T) {
	c := &Chart{Title: "per repo", Categories: []string{"a/b", "c/d"}, Series: []Series{{Y: []float64{0.5, -0.25}}}}
	if c.Empty() {
		t.Fatal("chart with data reported empty")
	}
	if n := strings.Count(c.SVG(300, 200), `fill="#1f77b4"`); n != 2 {
		t.Fatalf("%d bars, want 2", n)
	}
	if !(&Chart{Series: []Series{{X: []float64{1}, Y: []float64{math.NaN()}}}}).Empty() {
		t.Fatal("all-NaN chart not empty")
	}
}

func TestTicksAreRoundAndCover(t *testing.T) {
	got := ticks(-1.05, 1.05, 5)
	if got[0] > -1 || got[len(got)-1] < 1 {
		t.Fatalf("ticks %v do not cover [-1, 1]", got)
	}
	for _, v := range got {
		if math.Abs(v*2-math.Round(v*2)) > 1e-9 {
			t.Fatalf("tick %v is not round", v)
		}
	}
}
