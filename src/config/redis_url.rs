//! The Redis forms of `CODEMODE_STORE`: one server, a Redis Cluster, or a
//! master found through Redis Sentinel. Read without connecting.

/// Every form `CODEMODE_STORE` takes besides `memory`, for error messages.
pub(crate) const REDIS_FORMS: &str =
    "redis://[user:password@]host[:port][/db] (rediss:// for TLS), \
     redis+cluster://[user:password@]host:port,host:port,... (rediss+cluster:// for TLS), \
     redis+sentinel://[user:password@]host:port,host:port,.../master-name[/db] \
     (rediss+sentinel:// for TLS)";

/// Port of a cluster node named without one.
const REDIS_PORT: u16 = 6379;
/// Port of a sentinel named without one.
const SENTINEL_PORT: u16 = 26379;

/// Where a Redis store lives, as `CODEMODE_STORE` names it.
///
/// No `Debug`: the URLs may hold a password.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server: the URL as given, for `redis::Client::open`.
    Single(String),
    /// A Redis Cluster: a `redis://` (or `rediss://`) URL per seed node,
    /// each with the credentials.
    Cluster {
        /// Seed nodes; any reachable one tells the client the rest.
        nodes: Vec<String>,
    },
    /// The master Redis Sentinel names.
    Sentinel {
        /// A `redis://` (or `rediss://`) URL per sentinel, without credentials.
        sentinels: Vec<String>,
        /// The name the sentinels monitor the master under.
        master: String,
        /// Database on the master.
        db: i64,
        /// TLS to the sentinels and to the master.
        tls: bool,
        /// `user:password` (as written, percent-encoded) for the master.
        auth: Option<String>,
    },
}

impl RedisTarget {
    /// `v`, one of `REDIS_FORMS`; the error says what is wrong without
    /// repeating the password.
    pub fn parse(v: &str) -> Result<RedisTarget, String> {
        let v = v.trim();
        let (scheme, rest) = v
            .split_once("://")
            .ok_or("not a URL (no `://`)".to_owned())?;
        let (base, kind) = match scheme {
            "redis" | "rediss" => {
                // Redis' own message names what is wrong, never the URL.
                return redis::Client::open(v)
                    .map(|_| RedisTarget::Single(v.to_owned()))
                    .map_err(|e| format!("not a usable Redis URL ({e})"));
            }
            "redis+cluster" => ("redis", "cluster"),
            "rediss+cluster" => ("rediss", "cluster"),
            "redis+sentinel" => ("redis", "sentinel"),
            "rediss+sentinel" => ("rediss", "sentinel"),
            _ => return Err(format!("`{scheme}://` is not a store's scheme")),
        };
        // The password may hold `/` or `@`: the last `@` ends it.
        let (auth, rest) = match rest.rsplit_once('@') {
            Some((auth, rest)) => (Some(auth.to_owned()), rest),
            None => (None, rest),
        };
        let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let at = auth.as_ref().map_or_else(String::new, |a| format!("{a}@"));
        if kind == "cluster" {
            if segments.iter().any(|s| *s != "0") {
                return Err("a cluster has database 0 only: name no /db".into());
            }
            let nodes = host_list(hosts, REDIS_PORT)?
                .into_iter()
                .map(|h| format!("{base}://{at}{h}"))
                .collect::<Vec<_>>();
            for n in &nodes {
                usable(n)?;
            }
            return Ok(RedisTarget::Cluster { nodes });
        }
        let (master, db) = match segments.as_slice() {
            [master] => (*master, 0),
            [master, db] => match db.parse::<i64>() {
                Ok(db) if db >= 0 => (*master, db),
                _ => return Err(format!("`{db}` is not a database number")),
            },
            [] => return Err("name the master after the sentinels: .../master-name".into()),
            _ => return Err("too many parts after the sentinels: .../master-name[/db]".into()),
        };
        let sentinels: Vec<String> = host_list(hosts, SENTINEL_PORT)?
            .into_iter()
            .map(|h| format!("{base}://{h}"))
            .collect();
        for s in &sentinels {
            usable(s)?;
        }
        // The credentials are the master's: checked as Redis reads them.
        usable(&format!("{base}://{at}{}/{db}", hosts_of(&sentinels[0])))?;
        Ok(RedisTarget::Sentinel {
            sentinels,
            master: master.to_owned(),
            db,
            tls: base == "rediss",
            auth,
        })
    }
}

fn hosts_of(url: &str) -> &str {
    url.split_once("://").map_or(url, |(_, h)| h)
}

fn usable(url: &str) -> Result<(), String> {
    redis::Client::open(url)
        .map(|_| ())
        .map_err(|e| format!("not a usable Redis URL ({e})"))
}

/// `h:p,h:p,...` as `host:port` strings; `[v6]:port` is kept bracketed.
fn host_list(hosts: &str, default_port: u16) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for h in hosts.split(',').map(str::trim) {
        if h.is_empty() {
            return Err("an empty host in the list (h:p,h:p)".into());
        }
        let (host, port) = if let Some(v6) = h.strip_prefix('[') {
            let (addr, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("`{h}` opens `[` without closing it"))?;
            (format!("[{addr}]"), after.strip_prefix(':'))
        } else {
            match h.rsplit_once(':') {
                Some((host, port)) => (host.to_owned(), Some(port)),
                None => (h.to_owned(), None),
            }
        };
        let bad = |c: char| c.is_whitespace() || "/?#@,".contains(c);
        if host.is_empty() || host == "[]" || host.contains(bad) {
            return Err(format!("`{h}` is not a host[:port]"));
        }
        let port = match port {
            None => default_port,
            Some(p) => match p.parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => return Err(format!("`{h}` has no valid port")),
            },
        };
        out.push(format!("{host}:{port}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(v: &str) -> Vec<String> {
        match RedisTarget::parse(v) {
            Ok(RedisTarget::Cluster { nodes }) => nodes,
            Ok(_) => panic!("{v}: not a cluster"),
            Err(e) => panic!("{v}: {e}"),
        }
    }

    #[test]
    fn one_server_keeps_its_url() {
        for v in ["redis://h:6380/2", "rediss://u:p@h", "redis://127.0.0.1"] {
            assert!(
                RedisTarget::parse(v) == Ok(RedisTarget::Single(v.into())),
                "{v}"
            );
        }
    }

    #[test]
    fn a_cluster_is_its_seed_nodes_with_the_credentials() {
        assert_eq!(
            cluster("redis+cluster://a:7000,b:7001"),
            ["redis://a:7000", "redis://b:7001"]
        );
        assert_eq!(
            cluster("rediss+cluster://u:p%40ss@a:7000, b ,[::1]:7002/"),
            [
                "rediss://u:p%40ss@a:7000",
                "rediss://u:p%40ss@b:6379",
                "rediss://u:p%40ss@[::1]:7002"
            ]
        );
        assert_eq!(cluster("redis+cluster://a:1/0"), ["redis://a:1"]);
    }

    #[test]
    fn sentinels_name_a_master_and_a_database() {
        let Ok(RedisTarget::Sentinel {
            sentinels,
            master,
            db,
            tls,
            auth,
        }) = RedisTarget::parse("redis+sentinel://:s3cret@s1:26380,s2/mymaster/3")
        else {
            panic!("a sentinel URL");
        };
        assert_eq!(sentinels, ["redis://s1:26380", "redis://s2:26379"]);
        assert_eq!((master.as_str(), db, tls), ("mymaster", 3, false));
        assert_eq!(auth.as_deref(), Some(":s3cret"));
        let Ok(RedisTarget::Sentinel { db, tls, auth, .. }) =
            RedisTarget::parse("rediss+sentinel://s1:1/m")
        else {
            panic!("a TLS sentinel URL");
        };
        assert_eq!((db, tls, auth), (0, true, None));
    }

    #[test]
    fn malformed_forms_say_what_is_wrong() {
        for (bad, says) in [
            ("redis+cluster://", "empty host"),
            ("redis+cluster://a:1,,b:2", "empty host"),
            ("redis+cluster://a:notaport", "no valid port"),
            ("redis+cluster://a:0", "no valid port"),
            ("redis+cluster://a:1/2", "database 0 only"),
            ("redis+sentinel://s:1", "name the master"),
            ("redis+sentinel://s:1/", "name the master"),
            ("redis+sentinel://s:1/m/x", "not a database"),
            ("redis+sentinel://s:1/m/-1", "not a database"),
            ("redis+sentinel://s:1/m/0/extra", "too many parts"),
            ("redis+sentinel://[::1:1/m", "without closing"),
            ("redis+sentinel://a b:1/m", "not a host"),
            ("redis+clusters://a:1", "not a store's scheme"),
            ("redis:/h", "not a URL"),
        ] {
            match RedisTarget::parse(bad) {
                Err(e) => assert!(e.contains(says), "{bad}: {e}"),
                Ok(_) => panic!("{bad} was accepted"),
            }
        }
    }

    #[test]
    fn errors_never_repeat_the_password() {
        for bad in [
            "redis+cluster://u:s3cret@a:x",
            "redis+sentinel://u:s3cret@a:1",
            "rediss+sentinel://u:s3cret@a:1/m/db",
        ] {
            let e = RedisTarget::parse(bad).err().expect("refused");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }
}
