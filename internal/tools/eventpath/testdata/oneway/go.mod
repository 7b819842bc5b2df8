module github.com/streamer/streamer

go 1.26.0
