"""The data side: what the model reads, as NumPy arrays.

The lexicon and its loaders, typed word lists, word counts, the flat lattice of
a text, character rows, the features of a batch, documents cut into segments
and segments grouped under the attention budget, and the resources saved beside
the weights. Modules here import NumPy, spaCy and small libraries, and from the
package only `errors`, `types`, `settings` and each other; never torch or thinc.
"""
