//! Secrets never leave weft's memory: the values a configuration expanded
//! from `${VAR}` (a token in a header, a key in a URL's query, a password in
//! an environment variable) and a URL's credentials (`user:pass@`) are
//! replaced, in every message that leaves this crate (call errors, logged
//! upstream stderr), by `${VAR}` or `***`. One list per server, built where
//! the configuration is read.

/// One secret and what is shown instead.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Secrets(Vec<(String, String)>);

impl Secrets {
    /// No secrets.
    pub fn none() -> Self {
        Secrets::default()
    }

    /// Adds `value`, shown as `shown` (values shorter than 4 characters are
    /// left alone: replacing "1" or "on" everywhere would garble messages
    /// without protecting anything).
    pub fn add(&mut self, value: &str, shown: &str) {
        if value.chars().count() >= 4 && !self.0.iter().any(|(v, _)| v == value) {
            self.0.push((value.to_string(), shown.to_string()));
            // Longest first, so a secret inside another is not half-replaced.
            self.0.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        }
    }

    /// Adds the credentials of `url` (`scheme://user:pass@host/...`).
    pub fn add_url_credentials(&mut self, url: &str) {
        let Some((_, rest)) = url.split_once("://") else { return };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            self.add(userinfo, "***");
            if let Some((_, pass)) = userinfo.split_once(':') {
                self.add(pass, "***");
            }
        }
    }

    /// `text` with every secret replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, shown) in &self.0 {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), shown);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_wherever_they_appear() {
        let mut s = Secrets::none();
        s.add("tok-3f9a2c71e", "${CRM_TOKEN}");
        s.add("1", "${ONE}");
        s.add_url_credentials("https://ada:pa55word@crm.example/mcp?key=tok-3f9a2c71e");
        let msg = "cannot connect to https://ada:pa55word@crm.example/mcp?key=tok-3f9a2c71e: Bearer tok-3f9a2c71e refused (1 try)";
        let r = s.redact(msg);
        assert!(!r.contains("tok-3f9a2c71e") && !r.contains("pa55word"), "{r}");
        assert_eq!(
            r,
            "cannot connect to https://***@crm.example/mcp?key=${CRM_TOKEN}: Bearer ${CRM_TOKEN} refused (1 try)"
        );
        assert_eq!(Secrets::none().redact(msg), msg);
    }
}
