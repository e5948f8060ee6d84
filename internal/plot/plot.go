// Package plot draws the small charts of swerl's run report: line charts
// over a numeric x axis and bar charts over categories, rendered to SVG (for
// the self-contained HTML page) and to PNG (for copies that any viewer opens)
// from one layout, so the two always show the same thing.
package plot

import (
	"bytes"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Series is one line of a line chart. X and Y have equal length; points
// with a NaN Y are gaps.
type Series struct {
	Name string
	X, Y []float64
}

// Chart is a line chart (Series) or, when Categories is set, a bar chart with
// one bar per category taken from Series[0].Y.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	Categories            []string
}

// Palette is the colour of each series, in order.
var Palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
}

var (
	black = color.RGBA{0x22, 0x22, 0x22, 0xff}
	grey  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
)

// canvas is what a chart is drawn on; svgCanvas and pngCanvas implement it.
type canvas interface {
	line(x1, y1, x2, y2 float64, c color.RGBA, width float64)
	rect(x, y, w, h float64, c color.RGBA)
	dot(x, y, r float64, c color.RGBA)
	// text draws s with its baseline at y; anchor is "start", "middle" or "end".
	text(x, y float64, s string, anchor string, c color.RGBA)
}

// Empty reports whether the chart has nothing to draw.
func (c *Chart) Empty() bool {
	for _, s := range c.Series {
		for _, y := range s.Y {
			if !math.IsNaN(y) {
				return false
			}
		}
	}
	return true
}

func (c *Chart) bounds() (x0, x1, y0, y1 float64) {
	x0, y0 = math.Inf(1), math.Inf(1)
	x1, y1 = math.Inf(-1), math.Inf(-1)
	for _, s := range c.Series {
		for i, y := range s.Y {
			if math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			x := float64(i)
			if c.Categories == nil {
				x = s.X[i]
			}
			x0, x1 = math.Min(x0, x), math.Max(x1, x)
			y0, y1 = math.Min(y0, y), math.Max(y1, y)
		}
	}
	if math.IsInf(x0, 1) {
		return 0, 1, 0, 1
	}
	if c.Categories != nil {
		y0 = math.Min(y0, 0)
		y1 = math.Max(y1, 0)
	}
	if x0 == x1 {
		x0, x1 = x0-1, x1+1
	}
	if y0 == y1 {
		y0, y1 = y0-1, y1+1
	}
	pad := (y1 - y0) * 0.05
	return x0, x1, y0 - pad, y1 + pad
}

// ticks returns about n round tick values covering [lo, hi].
func ticks(lo, hi float64, n int) []float64 {
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/float64(n))))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= float64(n) {
			step *= m
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func label(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// draw lays the chart out on a w×h canvas.
func (c *Chart) draw(cv canvas, w, h float64) {
	cv.rect(0, 0, w, h, white)
	left, right, top, bottom := 60.0, 20.0, 30.0, 45.0
	if len(c.Series) > 1 && c.Categories == nil {
		top = 48 // room for the legend row under the title
	}
	pw, ph := w-left-right, h-top-bottom
	x0, x1, y0, y1 := c.bounds()
	if c.Categories != nil {
		x0, x1 = -0.5, float64(len(c.Categories))-0.5
	}
	px := func(x float64) float64 { return left + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return top + ph - (y-y0)/(y1-y0)*ph }

	cv.text(w/2, 18, c.Title, "middle", black)
	for _, t := range ticks(y0, y1, 5) {
		cv.line(left, py(t), left+pw, py(t), grey, 1)
		cv.text(left-6, py(t)+4, label(t), "end", black)
	}
	cv.line(left, top, left, top+ph, black, 1)
	cv.line(left, top+ph, left+pw, top+ph, black, 1)
	cv.text(left+pw/2, h-6, c.XLabel, "middle", black)
	cv.text(8, top-8, c.YLabel, "start", black)

	if c.Categories != nil {
		if len(c.Series) == 0 {
			return
		}
		bw := pw / float64(len(c.Categories)) * 0.7
		for i, cat := range c.Categories {
			y := c.Series[0].Y[i]
			if math.IsNaN(y) {
				continue
			}
			hi, lo := py(math.Max(y, 0)), py(math.Min(y, 0))
			cv.rect(px(float64(i))-bw/2, hi, bw, lo-hi, Palette[0])
			name := cat
			if len(name) > 14 {
				name = name[:13] + "…"
			}
			cv.text(px(float64(i)), top+ph+14, name, "middle", black)
		}
		return
	}
	intX := true
	for _, s := range c.Series {
		for _, x := range s.X {
			intX = intX && x == math.Trunc(x)
		}
	}
	for _, t := range ticks(x0, x1, 6) {
		if intX && t != math.Trunc(t) {
			continue // integer data (versions, steps): no fractional ticks
		}
		cv.text(px(t), top+ph+16, label(t), "middle", black)
	}
	lx := left

	for si, s := range c.Series {
		col := Palette[si%len(Palette)]
		prev := false
		var lastX, lastY float64
		for i := range s.Y {
			if math.IsNaN(s.Y[i]) {
				prev = false
				continue
			}
			x, y := px(s.X[i]), py(s.Y[i])
			if prev {
				cv.line(lastX, lastY, x, y, col, 2)
			}
			if len(s.Y) <= 60 {
				cv.dot(x, y, 3, col)
			}
			lastX, lastY, prev = x, y, true
		}
		if len(c.Series) > 1 {
			cv.rect(lx, top-20, 10, 10, col)
			cv.text(lx+15, top-11, s.Name, "start", black)
			lx += 15 + float64(7*len([]rune(s.Name))) + 20
		}
	}
}

// SVG renders the chart as an inline <svg> element.
func (c *Chart) SVG(w, h int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		w, h, w, h, html.EscapeString(c.Title))
	c.draw(&svgCanvas{&b}, float64(w), float64(h))
	b.WriteString("</svg>")
	return b.String()
}

// PNG renders the chart as a PNG image.
func (c *Chart) PNG(w, h int) ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	c.draw(&pngCanvas{img}, float64(w), float64(h))
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	return buf.Bytes(), nil
}

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

type svgCanvas struct{ b *strings.Builder }

func (s *svgCanvas) line(x1, y1, x2, y2 float64, c color.RGBA, w float64) {
	fmt.Fprintf(s.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%g"/>`, x1, y1, x2, y2, hex(c), w)
}

func (s *svgCanvas) rect(x, y, w, h float64, c color.RGBA) {
	fmt.Fprintf(s.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x, y, w, h, hex(c))
}

func (s *svgCanvas) dot(x, y, r float64, c color.RGBA) {
	fmt.Fprintf(s.b, `<circle cx="%.1f" cy="%.1f" r="%g" fill="%s"/>`, x, y, r, hex(c))
}

func (s *svgCanvas) text(x, y float64, t, anchor string, c color.RGBA) {
	fmt.Fprintf(s.b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-family="sans-serif" font-size="12" fill="%s">%s</text>`,
		x, y, anchor, hex(c), html.EscapeString(t))
}

type pngCanvas struct{ img *image.RGBA }

func (p *pngCanvas) rect(x, y, w, h float64, c color.RGBA) {
	r := image.Rect(int(math.Round(x)), int(math.Round(y)), int(math.Round(x+w)), int(math.Round(y+h))).Intersect(p.img.Bounds())
	for yy := r.Min.Y; yy < r.Max.Y; yy++ {
		for xx := r.Min.X; xx < r.Max.X; xx++ {
			p.img.SetRGBA(xx, yy, c)
		}
	}
}

func (p *pngCanvas) dot(x, y, r float64, c color.RGBA) {
	for yy := int(y - r); yy <= int(y+r); yy++ {
		for xx := int(x - r); xx <= int(x+r); xx++ {
			if (float64(xx)-x)*(float64(xx)-x)+(float64(yy)-y)*(float64(yy)-y) <= r*r {
				if image.Pt(xx, yy).In(p.img.Bounds()) {
					p.img.SetRGBA(xx, yy, c)
				}
			}
		}
	}
}

func (p *pngCanvas) line(x1, y1, x2, y2 float64, c color.RGBA, w float64) {
	n := int(math.Max(math.Abs(x2-x1), math.Abs(y2-y1))) + 1
	half := w / 2
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		x, y := x1+(x2-x1)*t, y1+(y2-y1)*t
		p.rect(x-half+0.5, y-half+0.5, math.Max(w, 1), math.Max(w, 1), c)
	}
}

func (p *pngCanvas) text(x, y float64, s, anchor string, c color.RGBA) {
	face := basicfont.Face7x13
	width := font.MeasureString(face, s).Round()
	switch anchor {
	case "middle":
		x -= float64(width) / 2
	case "end":
		x -= float64(width)
	}
	d := font.Drawer{Dst: p.img, Src: image.NewUniform(c), Face: face,
		Dot: fixed.P(int(math.Round(x)), int(math.Round(y)))}
	d.DrawString(s)
}
