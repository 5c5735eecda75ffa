//! An S3 server for tests: `s3s-fs` over a directory on `127.0.0.1` over plain HTTP, checking
//! SigV4 signatures with one access key; in process ([`S3TestServer`], stops when dropped) or
//! as the `nubo-s3-server` process ([`serve`]).

use async_trait::async_trait;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use nubo_common::secret::Secret;
use nubo_common::storage::s3::S3Config;
use s3s::dto::*;
use s3s::{S3, S3ErrorCode, S3Request, S3Response, S3Result};
use s3s_fs::FileSystem;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// A running S3 test server and what a client needs to reach it (path-style addressing).
pub struct S3TestServer {
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
    pub region: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
    /// The server's storage: bucket `b` is the directory `dir/b`, object `k` the file `dir/b/k`.
    pub dir: TempDir,
    server: JoinHandle<()>,
}

impl S3TestServer {
    /// Starts a server with one empty bucket.
    pub async fn start() -> Self {
        let dir = tempfile::Builder::new().prefix("nubo-s3-").tempdir().expect("temporary directory");
        let bucket = "nubo-test".to_owned();
        let access_key = format!("AK{}", uuid::Uuid::new_v4().simple());
        let secret_key = format!("SK{}", uuid::Uuid::new_v4().simple());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the S3 test server");
        let endpoint = format!("http://{}", listener.local_addr().expect("local address"));
        let serving =
            serve(listener, dir.path(), &bucket, &access_key, &secret_key).expect("s3s-fs over the directory");
        let server = tokio::spawn(serving);
        Self { endpoint, region: "us-east-1".into(), bucket, access_key, secret_key, dir, server }
    }

    /// A driver configuration for this server, storing keys under `prefix`.
    pub fn config(&self, prefix: Option<&str>) -> S3Config {
        S3Config {
            endpoint: Some(self.endpoint.clone()),
            region: self.region.clone(),
            bucket: self.bucket.clone(),
            path_style: true,
            access_key: self.access_key.clone(),
            secret_key: Secret::new(self.secret_key.clone()),
            prefix: prefix.map(str::to_owned),
        }
    }
}

impl S3TestServer {
    /// Files the server keeps for unfinished multipart uploads (their records and parts): none
    /// once every upload has been completed or aborted.
    pub fn multipart_leftovers(&self) -> Vec<String> {
        let entries = std::fs::read_dir(self.dir.path()).expect("server directory");
        entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(".upload"))
            .collect()
    }
}

impl Drop for S3TestServer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Serves S3 on `listener` over `root` (bucket `bucket` is the directory `root/bucket`, made
/// when missing), checking SigV4 signatures with the one key pair; the returned future runs
/// until dropped or aborted, which ends every open connection too. Used in process by
/// [`S3TestServer`] and as a process of its own by the `nubo-s3-server` binary.
pub fn serve(
    listener: TcpListener,
    root: &std::path::Path,
    bucket: &str,
    access_key: &str,
    secret_key: &str,
) -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    // s3s-fs keeps a bucket as a directory of its root.
    std::fs::create_dir_all(root.join(bucket))?;
    let fs = FileSystem::new(root).map_err(|err| std::io::Error::other(format!("s3s-fs: {err:?}")))?;
    let service = {
        let mut builder = s3s::service::S3ServiceBuilder::new(WithResponseOverrides(fs));
        builder.set_auth(s3s::auth::SimpleAuth::from_single(access_key, secret_key));
        builder.build()
    };
    Ok(async move {
        let http = ConnBuilder::new(TokioExecutor::new());
        let mut connections = JoinSet::new();
        loop {
            let Ok((socket, _)) = listener.accept().await else { continue };
            let connection = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
            connections.spawn(async move {
                let _ = connection.await;
            });
            // Reap finished connections so the set does not grow over a long run.
            while connections.try_join_next().is_some() {}
        }
    })
}

/// s3s-fs with the `response-*` overrides of GetObject that real S3 honours (a presigned
/// download names its file through `response-content-disposition`); everything else as is.
struct WithResponseOverrides(FileSystem);

/// Implements [`S3`] for [`WithResponseOverrides`]: GetObject with the overrides, the
/// operations on an upload id with S3's error for an unknown one (s3s-fs answers AccessDenied
/// where S3 answers NoSuchUpload), the rest forwarded to s3s-fs unchanged. One macro around the
/// whole impl, because `async_trait` must see every method.
macro_rules! s3_with_overrides {
    (
        uploads { $($upload_op:ident: $upload_in:ty => $upload_out:ty),* $(,)? }
        forwarded { $($operation:ident: $input:ty => $output:ty),* $(,)? }
    ) => {
        #[async_trait]
        impl S3 for WithResponseOverrides {
            async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
                let disposition = req.input.response_content_disposition.clone();
                let content_type = req.input.response_content_type.clone();
                let mut response = self.0.get_object(req).await?;
                if disposition.is_some() {
                    response.output.content_disposition = disposition;
                }
                if content_type.is_some() {
                    response.output.content_type = content_type;
                }
                Ok(response)
            }

            $(
                async fn $upload_op(&self, req: S3Request<$upload_in>) -> S3Result<S3Response<$upload_out>> {
                    // With a single access key, s3s-fs denies access only to upload ids it does not know.
                    self.0.$upload_op(req).await.map_err(|err| match err.code() {
                        S3ErrorCode::AccessDenied => s3s::s3_error!(NoSuchUpload),
                        _ => err,
                    })
                }
            )*

            $(
                async fn $operation(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    self.0.$operation(req).await
                }
            )*
        }
    };
}

s3_with_overrides! {
    uploads {
        abort_multipart_upload: AbortMultipartUploadInput => AbortMultipartUploadOutput,
        complete_multipart_upload: CompleteMultipartUploadInput => CompleteMultipartUploadOutput,
        upload_part: UploadPartInput => UploadPartOutput,
    }
    forwarded {
        copy_object: CopyObjectInput => CopyObjectOutput,
        create_bucket: CreateBucketInput => CreateBucketOutput,
        create_multipart_upload: CreateMultipartUploadInput => CreateMultipartUploadOutput,
        delete_bucket: DeleteBucketInput => DeleteBucketOutput,
        delete_object: DeleteObjectInput => DeleteObjectOutput,
        delete_objects: DeleteObjectsInput => DeleteObjectsOutput,
        get_bucket_location: GetBucketLocationInput => GetBucketLocationOutput,
        head_bucket: HeadBucketInput => HeadBucketOutput,
        head_object: HeadObjectInput => HeadObjectOutput,
        list_buckets: ListBucketsInput => ListBucketsOutput,
        list_objects: ListObjectsInput => ListObjectsOutput,
        list_objects_v2: ListObjectsV2Input => ListObjectsV2Output,
        list_parts: ListPartsInput => ListPartsOutput,
        put_object: PutObjectInput => PutObjectOutput,
        upload_part_copy: UploadPartCopyInput => UploadPartCopyOutput,
    }
}
