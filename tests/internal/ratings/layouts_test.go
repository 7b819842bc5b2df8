package ratings

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// joined is fields joined by sep and ended by end: a line of a layout,
// built from values so that the tests hold no data rows.
func joined(sep, end string, fields ...any) string {
	s := make([]string, len(fields))
	for k, f := range fields {
		s[k] = fmt.Sprint(f)
	}
	return strings.Join(s, sep) + end
}

// writeSet writes ratings and items (id → genres, nil: none) to dir as
// files of layout csv, dat or 100k, every line generated from them: the
// genre names are made up, as are the titles (no MovieLens data is in the
// repository). It returns the files' names.
func writeSet(t *testing.T, dir, layout string, rs []Rating, items Genres, genreNames []string) []string {
	t.Helper()
	ids := slices.Sorted(maps.Keys(items))
	genres := func(id int) string {
		if len(items[id]) == 0 {
			return NoGenres
		}
		return strings.Join(items[id], "|")
	}
	var rf, mf strings.Builder
	files := map[string]*strings.Builder{}
	switch layout {
	case "csv": // a header each; a title with a comma, quoted
		rf.WriteString(joined(",", "\n", "user", "item", "value", "time"))
		mf.WriteString(joined(",", "\n", "item", "title", "genres"))
		for _, r := range rs {
			rf.WriteString(joined(",", "\n", r.User, r.Item, strconv.FormatFloat(r.Value, 'f', 1, 64), r.Time)) // 4.0, not 4
		}
		for _, id := range ids {
			mf.WriteString(joined(",", "\n", id, fmt.Sprintf(`"Title %d, with a comma"`, id), genres(id)))
		}
		files["ratings.csv"], files["movies.csv"] = &rf, &mf
	case "dat": // CRLF line ends; a title in Latin-1 with a colon; a blank last line
		for _, r := range rs {
			rf.WriteString(joined("::", "\r\n", r.User, r.Item, r.Value, r.Time))
		}
		for _, id := range ids {
			mf.WriteString(joined("::", "\n", id, fmt.Sprintf("Title %d: caf\xe9", id), genres(id)))
		}
		mf.WriteString("\n")
		files["ratings.dat"], files["movies.dat"] = &rf, &mf
	case "100k": // tabs; a flag per genre of u.genre
		var gf strings.Builder
		for k, g := range genreNames {
			gf.WriteString(joined("|", "\n", g, k))
		}
		gf.WriteString("\n")
		for _, r := range rs {
			rf.WriteString(joined("\t", "\n", r.User, r.Item, r.Value, r.Time))
		}
		for _, id := range ids {
			fields := []any{id, fmt.Sprintf("Title %d", id), "", "", fmt.Sprintf("http://example.org/%d", id)}
			for _, g := range genreNames {
				flag := 0
				if slices.Contains(items[id], g) || len(items[id]) == 0 && g == "unknown" {
					flag = 1
				}
				fields = append(fields, flag)
			}
			mf.WriteString(joined("|", "\n", fields...))
		}
		files["u.data"], files["u.item"], files["u.genre"] = &rf, &mf, &gf
	default:
		t.Fatalf("layout %q", layout)
	}
	var names []string
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// The same small set, written in each of GroupLens' layouts, reads the
// same, with and without the movies' file.
func TestReadMovieLensLayouts(t *testing.T) {
	wantRatings := []Rating{{2, 10, 3.5, 100}, {1, 11, 4, 100}, {1, 10, 1, 99}}
	wantGenres := Genres{10: {"Alpha", "Gamma"}, 11: nil, 12: {"Delta's", "Eps-ilon"}}
	genreNames := []string{"unknown", "Alpha", "Beta", "Gamma", "Delta's", "Eps-ilon"}
	for _, layout := range []string{"csv", "dat", "100k"} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			names := writeSet(t, dir, layout, wantRatings, wantGenres, genreNames)
			rs, g, err := ReadMovieLens(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rs, wantRatings) {
				t.Errorf("ratings %v, want %v", rs, wantRatings)
			}
			if !maps.EqualFunc(g, wantGenres, slices.Equal) {
				t.Errorf("genres %v, want %v", g, wantGenres)
			}
			if only, err := ReadMovieLensRatings(dir); err != nil || !slices.Equal(only, wantRatings) {
				t.Errorf("ReadMovieLensRatings: %v, %v", only, err)
			}
			// Without the movies' file: the same ratings, and no genres.
			for _, name := range names {
				if name != "ratings.csv" && name != "ratings.dat" && name != "u.data" {
					if err := os.Remove(filepath.Join(dir, name)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if rs, g, err := ReadMovieLens(dir); err != nil || !slices.Equal(rs, wantRatings) || g != nil {
				t.Errorf("without the movies' file: %v, %v, %v", rs, g, err)
			}
		})
	}
}

// A file that is not what its layout says is an error that names the file
// and the line.
func TestReadMovieLensErrors(t *testing.T) {
	dat := func(f ...any) string { return joined("::", "\n", f...) }
	tab := func(f ...any) string { return joined("\t", "\n", f...) }
	bar := func(f ...any) string { return joined("|", "\n", f...) }
	for _, c := range []struct {
		file, text, want string
	}{
		{"ratings.dat", dat(1, 10, 5, 100) + dat(1, 10, 5), "ratings.dat: line 2: 3 fields, want 4"},
		{"ratings.dat", dat(1, 10, "five", 100), "ratings.dat: line 1: strconv.ParseFloat"},
		{"u.data", tab(1, 10, 5, 100) + "\n" + tab(1, "x", 5, 100), "u.data: line 3: strconv.Atoi"},
		{"movies.dat", joined(" ", "\n", 10, "Title", "Alpha"), "movies.dat: line 1: want MovieID::Title::Genres"},
		{"u.item", bar(10, "Title", "", "", "url", 0, 1), "u.item: line 1: 7 fields, want 8"},
		{"u.item", bar(10, "Title", "", "", "url", 0, 0, 2), `genre flag 2 (c) is "2"`},
		{"u.genre", bar("a", 0) + bar("b", 2), `u.genre: line 2: genre "b" at position 2, want 1`},
		{"u.genre", "", "u.item needs its genres' names"}, // no u.genre
	} {
		dir := t.TempDir()
		files := map[string]string{"ratings.dat": dat(1, 10, 5, 100), "movies.dat": dat(10, "Title", "Alpha")}
		if strings.HasPrefix(c.file, "u.") {
			files = map[string]string{"u.data": tab(1, 10, 5, 100), "u.genre": bar("a", 0) + bar("b", 1) + bar("c", 2),
				"u.item": bar(10, "Title", "", "", "url", 0, 1, 0)}
		}
		files[c.file] = c.text
		if c.text == "" {
			delete(files, c.file)
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := ReadMovieLens(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %v, want one with %q", c.file, c.text, err, c.want)
		}
	}
	if _, _, err := ReadMovieLens(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no MovieLens set: want ratings.csv and movies.csv, or ratings.dat") {
		t.Errorf("an empty directory: %v", err)
	}
}
