"""What a user declares: `Model` and `TensorSpec`, results and errors, and the readers that turn a model
file or a model repository folder into `Model` declarations. Imports nothing of the core or a wire."""
