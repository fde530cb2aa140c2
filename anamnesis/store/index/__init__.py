"""In-process indexes over what a store holds: a numpy matrix of vectors, and BM25
postings that rank exactly as FTS5's ``bm25()``."""
