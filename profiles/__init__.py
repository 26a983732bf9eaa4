"""my.cnf profiles: option catalog (data), profile model, renderer, lint, diff, shipped profiles."""
