//! Recipient notification channels (`[notifications.smtp]`, `[notifications.sms]`, CONTRACT
//! §14): validated at start; credentials come from the environment and are hidden in `Debug`.

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotifications {
    #[serde(default)]
    smtp: Option<RawSmtp>,
    #[serde(default)]
    sms: Option<RawSms>,
    /// How long a sender's claim on a message holds (`2m`): a message left `sending` by a
    /// crashed process is `uncertain` after it. Longer than a send's timeouts (15 s).
    #[serde(default)]
    lease: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSmtp {
    host: String,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    security: Option<String>,
    from: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSms {
    url: String,
    from: String,
    #[serde(default)]
    reference_field: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpSecurity {
    StartTls,
    Tls,
    None,
}

#[derive(Clone, PartialEq, Eq)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub security: SmtpSecurity,
    /// `Name <address>`.
    pub from: String,
    pub user: Option<String>,
    pub password: Option<String>,
}

impl std::fmt::Debug for SmtpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("user", &self.user.as_ref().map(|_| "<hidden>"))
            .finish_non_exhaustive()
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct SmsSettings {
    pub url: String,
    pub from: String,
    /// The form field that carries the message's own reference, fixed when it was enqueued
    /// (every attempt, a repeat after a crash too, sends the same), for a provider that takes
    /// a client reference (`None`: the reference goes in the `Idempotency-Key` header only).
    pub reference_field: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
}

impl std::fmt::Debug for SmsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmsSettings").field("url", &self.url).finish_non_exhaustive()
    }
}

/// The configured channels; `None` = not configured (messages recorded `not_configured`).
#[derive(Debug, Clone)]
pub struct NotificationConfig {
    pub smtp: Option<SmtpSettings>,
    pub sms: Option<SmsSettings>,
    pub lease: std::time::Duration,
}

impl Default for NotificationConfig {
    fn default() -> Self {
        NotificationConfig { smtp: None, sms: None, lease: std::time::Duration::from_secs(120) }
    }
}

/// The credentials from `DROPSLOT_SMTP_USER`/`_PASSWORD` and `DROPSLOT_SMS_USER`/`_PASSWORD`.
#[derive(Debug, Default, Clone)]
pub struct Credentials {
    pub smtp_user: Option<String>,
    pub smtp_password: Option<String>,
    pub sms_user: Option<String>,
    pub sms_password: Option<String>,
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

pub(super) fn build(raw: RawNotifications, creds: &Credentials) -> Result<NotificationConfig, String> {
    let smtp = match raw.smtp {
        None => None,
        Some(s) => {
            let security = match s.security.as_deref().unwrap_or("starttls") {
                "starttls" => SmtpSecurity::StartTls,
                "tls" => SmtpSecurity::Tls,
                "none" if is_loopback(&s.host) => SmtpSecurity::None,
                "none" => {
                    return Err(format!(
                        "notifications.smtp.security: \"none\" sends mail in clear text and is allowed only to a \
                         loopback host, not {:?}",
                        s.host
                    ));
                }
                other => return Err(format!("notifications.smtp.security: {other:?} must be starttls, tls or none")),
            };
            if s.host.trim().is_empty() {
                return Err("notifications.smtp.host: required".into());
            }
            let Some((_, rest)) = s.from.split_once('<') else {
                return Err(format!("notifications.smtp.from: {:?} must be \"Name <address>\"", s.from));
            };
            if !rest.trim_end().ends_with('>') || !rest.contains('@') {
                return Err(format!("notifications.smtp.from: {:?} must be \"Name <address>\"", s.from));
            }
            let port = s.port.unwrap_or(match security {
                SmtpSecurity::Tls => 465,
                SmtpSecurity::StartTls => 587,
                SmtpSecurity::None => 25,
            });
            Some(SmtpSettings {
                host: s.host,
                port,
                security,
                from: s.from,
                user: creds.smtp_user.clone(),
                password: creds.smtp_password.clone(),
            })
        }
    };
    let sms = match raw.sms {
        None => None,
        Some(s) => {
            if !(s.url.starts_with("https://") || s.url.starts_with("http://")) {
                return Err(format!("notifications.sms.url: {:?} must be an http(s) URL", s.url));
            }
            if s.from.trim().is_empty() {
                return Err("notifications.sms.from: required".into());
            }
            if let Some(f) = &s.reference_field {
                let name_ok = !f.is_empty()
                    && f.len() <= 64
                    && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
                if !name_ok || ["To", "From", "Body"].contains(&f.as_str()) {
                    return Err(format!(
                        "notifications.sms.reference_field: {f:?} must be a form field name (letters, digits, `_`, `-`, `.`; not To, From or Body)"
                    ));
                }
            }
            Some(SmsSettings {
                url: s.url,
                from: s.from,
                reference_field: s.reference_field,
                user: creds.sms_user.clone(),
                password: creds.sms_password.clone(),
            })
        }
    };
    let lease = match raw.lease.as_deref() {
        None => std::time::Duration::from_secs(120),
        Some(text) => {
            let d = super::parse_duration(text).map_err(|e| format!("notifications.lease: {e}"))?;
            if d < std::time::Duration::from_secs(1) || d > std::time::Duration::from_secs(3600) {
                return Err("notifications.lease: from 1s to 1h".into());
            }
            d
        }
    };
    Ok(NotificationConfig { smtp, sms, lease })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(toml_text: &str) -> RawNotifications {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn clear_text_only_to_loopback() {
        let c = Credentials::default();
        let none = |host: &str| format!("[smtp]\nhost = \"{host}\"\nsecurity = \"none\"\nfrom = \"Shop <a@b.c>\"");
        assert!(build(raw(&none("127.0.0.1")), &c).is_ok());
        assert!(build(raw(&none("smtp.example.com")), &c).unwrap_err().contains("loopback"));
        let s = build(raw("[smtp]\nhost = \"smtp.example.com\"\nfrom = \"Shop <a@b.c>\""), &c).unwrap();
        assert_eq!(s.smtp.unwrap().port, 587);
        assert!(build(raw("[smtp]\nhost = \"h\"\nfrom = \"a@b.c\""), &c).is_err());
    }

    #[test]
    fn the_sms_reference_field_is_a_form_field_name() {
        let c = Credentials::default();
        let sms = |field: &str| format!("[sms]\nurl = \"https://sms.example\"\nfrom = \"+1555\"\n{field}");
        assert_eq!(build(raw(&sms("")), &c).unwrap().sms.unwrap().reference_field, None);
        let set = build(raw(&sms("reference_field = \"client-ref\"")), &c).unwrap();
        assert_eq!(set.sms.unwrap().reference_field.as_deref(), Some("client-ref"));
        for bad in ["", "Body", "a b", "x=y"] {
            let e = build(raw(&sms(&format!("reference_field = \"{bad}\""))), &c).unwrap_err();
            assert!(e.contains("notifications.sms.reference_field"), "{bad}: {e}");
        }
    }
}
