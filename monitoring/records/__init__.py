"""What trainers write besides stdout, read into points: TensorBoard event files, Lightning's
metrics.csv, HF's trainer_state.json. Pure and incremental, no Django."""
