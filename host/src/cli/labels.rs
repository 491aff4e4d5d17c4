//! `--label KEY=VALUE` arguments (`weft run`, `weft runs list`): parsed
//! and checked against the caps of labels before anything is stored.

use super::bad;

/// The labels of repeated `--label KEY=VALUE` arguments, checked.
pub fn parse_labels(raw: &[String]) -> anyhow::Result<weft_model::Labels> {
    let mut labels = weft_model::Labels::new();
    for text in raw {
        let (k, v) = weft_model::labels::parse_label(text, '=').map_err(|e| bad(anyhow::anyhow!("--label: {e}")))?;
        labels.insert(k, v);
    }
    if let Some(p) = weft_model::labels::check_labels(&labels, "").first() {
        let key = p.path.trim_start_matches('/');
        return Err(bad(anyhow::anyhow!("--label {key}: {}", p.message)));
    }
    Ok(labels)
}
