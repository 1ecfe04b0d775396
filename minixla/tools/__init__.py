"""Command-line tools behind `minixla <command>`: run, opt, graph, diff, cache, backends."""
