package ratings

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The same small set, written in each of GroupLens' layouts, reads the
// same (the files are made up here: no MovieLens data is in the
// repository).
func TestReadMovieLensLayouts(t *testing.T) {
	wantRatings := []Rating{{2, 10, 3.5, 100}, {1, 11, 4, 100}, {1, 10, 1, 99}}
	wantGenres := Genres{10: {"Action", "Crime"}, 11: nil, 12: {"Children's", "Sci-Fi"}}
	// the 100K layout's genres are u.genre's, made up here
	genres := []string{"unknown", "Action", "Noir", "Crime", "Children's", "Sci-Fi"}
	var uGenre strings.Builder
	for k, g := range genres {
		fmt.Fprintf(&uGenre, "%s|%d\n", g, k)
	}
	flags := func(names ...string) string {
		f := make([]string, len(genres))
		for k, g := range genres {
			f[k] = "0"
			if slices.Contains(names, g) {
				f[k] = "1"
			}
		}
		return strings.Join(f, "|")
	}
	for _, c := range []struct {
		name  string
		files map[string]string
	}{
		{"csv", map[string]string{
			"ratings.csv": "userId,movieId,rating,timestamp\n2,10,3.5,100\n1,11,4.0,100\n1,10,1,99\n",
			"movies.csv": "movieId,title,genres\n10,\"A title, with a comma\",Action|Crime\n11,Another title," + NoGenres +
				"\n12,A third (1999),Children's|Sci-Fi\n",
		}},
		{"dat", map[string]string{
			"ratings.dat": "2::10::3.5::100\r\n1::11::4::100\r\n1::10::1::99\r\n",
			"movies.dat":  "10::A title: with \xe9 colon (1995)::Action|Crime\n11::Another title::" + NoGenres + "\n12::A third (1999)::Children's|Sci-Fi\n\n",
		}},
		{"100k", map[string]string{
			"u.data":  "2\t10\t3.5\t100\n1\t11\t4\t100\n1\t10\t1\t99\n",
			"u.genre": uGenre.String() + "\n",
			"u.item": "10|A title (1995)|01-Jan-1995||http://example.org/10|" + flags("Action", "Crime") + "\n" +
				"11|Another title|01-Jan-1995||http://example.org/11|" + flags("unknown") + "\n" +
				"12|A third (1999)|01-Jan-1999||http://example.org/12|" + flags("Children's", "Sci-Fi") + "\n",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
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
			for name := range c.files {
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
	for _, c := range []struct {
		file, text, want string
	}{
		{"ratings.dat", "1::10::5::100\n1::10::5\n", "ratings.dat: line 2: 3 fields, want 4"},
		{"ratings.dat", "1::10::five::100\n", "ratings.dat: line 1: strconv.ParseFloat"},
		{"u.data", "1\t10\t5\t100\n\n1\tx\t5\t100\n", "u.data: line 3: strconv.Atoi"},
		{"movies.dat", "10 Title Drama\n", "movies.dat: line 1: want MovieID::Title::Genres"},
		{"u.item", "10|Title|||url|0|1\n", "u.item: line 1: 7 fields, want 8"},
		{"u.item", "10|Title|||url|0|0|2\n", `genre flag 2 (c) is "2"`},
		{"u.genre", "a|0\nb|2\n", `u.genre: line 2: genre "b" at position 2, want 1`},
		{"u.genre", "", "u.item needs its genres' names"}, // no u.genre
	} {
		dir := t.TempDir()
		files := map[string]string{"ratings.dat": "1::10::5::100\n", "movies.dat": "10::Title::Drama\n"}
		if strings.HasPrefix(c.file, "u.") {
			files = map[string]string{"u.data": "1\t10\t5\t100\n", "u.genre": "a|0\nb|1\nc|2\n", "u.item": "10|Title|||url|0|1|0\n"}
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
