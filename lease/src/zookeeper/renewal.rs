//! Renewal: the state record written to this identity's `servers` node, fenced by the
//! ephemeral `instances` node and the version last written, in one `multi`.

use zookeeper_client as zk;

use super::session::{session_gone, Fault};
use super::ZooKeeperCoordinator;
use crate::LeaseError;

impl ZooKeeperCoordinator {
    /// Writes `data` to our `servers` node, fenced by our ephemeral node and the version.
    pub(super) fn write_fenced(&mut self, data: Vec<u8>) -> Result<(), LeaseError> {
        let Some(held) = &self.held else {
            return Err(LeaseError::lost("no worker id is held"));
        };
        let (instance, server, version) = (
            held.instance_path.clone(),
            held.server_path.clone(),
            held.version,
        );
        let written = self.call(|client| async move {
            let mut writer = client.new_multi_writer();
            writer.add_check_version(&instance, 0)?;
            writer.add_set_data(&server, &data, Some(version))?;
            writer.commit().await.map_err(zk::Error::from)
        });
        match written {
            Ok(results) => {
                let stat = results.into_iter().find_map(|result| match result {
                    zk::MultiWriteResult::SetData { stat } => Some(stat),
                    _ => None,
                });
                if let (Some(stat), Some(held)) = (stat, self.held.as_mut()) {
                    held.version = stat.version;
                }
                Ok(())
            }
            Err(Fault::Zk(error)) if session_gone(&error) => Err(LeaseError::lost(format!(
                "the ZooKeeper session expired ({error}); worker id {} may belong to someone else",
                held.worker_id
            ))),
            Err(Fault::Zk(zk::Error::NoNode)) => Err(LeaseError::lost(format!(
                "the nodes of worker id {} are gone (taken over or deleted)",
                held.worker_id
            ))),
            Err(Fault::Zk(zk::Error::BadVersion)) => self.recover_version(),
            Err(fault) => Err(self.unavailable(format!("renew: {fault}"))),
        }
    }

    /// After `BadVersion`: a write of ours that timed out may have landed after all. If our
    /// session still owns the ephemeral node, nobody else wrote our node: adopt its version.
    pub(super) fn recover_version(&mut self) -> Result<(), LeaseError> {
        let Some(held) = &self.held else {
            return Err(LeaseError::lost("no worker id is held"));
        };
        let (instance, server) = (held.instance_path.clone(), held.server_path.clone());
        let session_id = self.session_id().unwrap_or(0);
        let owner = self.call(|client| async move { client.check_stat(&instance).await });
        let ours = matches!(owner, Ok(Some(ref stat)) if stat.ephemeral_owner == session_id);
        if !ours {
            return Err(LeaseError::lost(
                "the ephemeral node is no longer this session's",
            ));
        }
        match self.call(|client| async move { client.check_stat(&server).await }) {
            Ok(Some(stat)) => {
                if let Some(held) = self.held.as_mut() {
                    held.version = stat.version;
                }
                Err(self.unavailable("renew: our last write landed late; retrying"))
            }
            Ok(None) => Err(LeaseError::lost("the servers node is gone")),
            Err(fault) => Err(self.unavailable(fault)),
        }
    }
}
