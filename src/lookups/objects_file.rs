//! The cluster objects of a file (`mutate --objects`, `serve --objects`):
//! ServiceAccounts, Secrets, ClusterStorageContainers and InferenceServices,
//! as multi-document YAML/JSON or Lists, read with the core's reader.

use kserve_injector_core::cluster::{ClusterSnapshot, LoadedSnapshot, ObjectsLoadError};
use kserve_injector_core::reader;
use std::io::BufRead;

/// Why a file of objects could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsFileError {
    #[error(transparent)]
    Read(#[from] reader::ReadError),
    #[error(transparent)]
    Objects(#[from] ObjectsLoadError),
}

/// Loads a file of objects; documents of other kinds are counted in
/// [`LoadedSnapshot::ignored`]. The whole input is kept, so the default
/// [`reader::Budget`]'s input limits bound it.
pub fn load_objects(input: &mut impl BufRead) -> Result<LoadedSnapshot, ObjectsFileError> {
    load_objects_within(input, reader::Budget::default())
}

/// [`load_objects`] within `budget`.
pub(crate) fn load_objects_within(
    input: &mut impl BufRead,
    budget: reader::Budget,
) -> Result<LoadedSnapshot, ObjectsFileError> {
    let mut docs = Vec::new();
    for doc in reader::documents_within(input, budget)? {
        docs.push(doc?);
    }
    Ok(ClusterSnapshot::load(docs)?)
}
