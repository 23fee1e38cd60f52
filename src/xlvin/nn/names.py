"""The names of the model's variants, torch-free: what a config field may choose (`xlvin.run.
config`, whose flags the command line's parser lists without importing torch), beside the
modules that implement each."""

#: The MLP encoder's hidden activations (`xlvin.nn.encoders.ACTIVATIONS`).
ACTIVATION_NAMES = ("relu", "tanh")
#: How the executor's message passing aggregates a node's messages (`xlvin.nn.executor`).
AGGREGATIONS = ("max", "sum")
#: The executor's messages: Linear then ReLU, or Linear alone (`xlvin.nn.executor`).
MESSAGES = ("relu", "linear")
#: The joint actions a tree node expands (`xlvin.nn.expansion`).
EXPANSIONS = ("all", "uniform", "gaussian", "policy")
#: Where the TransE loss draws its negatives s~ (paper eq. 2 compares z(s~) with z(s')):
#: "states", a permutation of the batch's states (ours); "next_states", the batch's next states
#: drawn with replacement (the authors' code: dransyhe/CNAP, TransE.contrastive_loss).
NEGATIVES = ("states", "next_states")
