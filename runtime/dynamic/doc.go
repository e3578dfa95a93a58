// Package dynamic runs a plan compiled for a dynamic batch: a folder of
// plans of the same model at several batch sizes (its manifest,
// dynamic.json, lists them with each graph input's and output's batch
// axis) sharing one parameters file. A batch of n samples runs as chunks:
// as many of the largest size as fit, then the rest in the smallest size
// that holds it, padded with copies of its last sample (a real sample, so
// that a padded row never fails a check a real one passes); the outputs'
// padding is dropped and the chunks' outputs are joined. A batch of a
// compiled size runs its plan directly, with no copy.
//
// That is only correct for a model that computes every sample on its
// own, which pipeline.CompileDynamic proves before it writes the folder
// (analysis/batchdim). A plan is loaded the first time a batch needs it;
// the largest when the folder is opened.
package dynamic
