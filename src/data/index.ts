// Datasets: Hugging Face dataset repos, local directories and data files, read by split spec.
export { loadDataset, streamDataset, datasetSplits, type LoadDatasetOptions } from "./load.js";
export { parseSplit, sliceRange, SplitError, type SplitSlice } from "./split.js";
export { findSplitFiles, DataFilesError, type SplitFiles } from "./data-files.js";
export { DataFileError } from "./readers.js";
